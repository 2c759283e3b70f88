"""Moved to bsdcrypt.hosts.verbose: re-exported here until every branch has merged the move."""

from bsdcrypt.hosts.verbose import VerboseHost, describe, enable, enabled, probe_commands, unwrap, wrap

__all__ = ["VerboseHost", "describe", "enable", "enabled", "probe_commands", "unwrap", "wrap"]
