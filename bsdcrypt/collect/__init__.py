"""Reading what other engines and people collected: pastes and the standalone probe's output."""
