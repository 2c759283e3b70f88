"""Which files each loader(8) generation reads, in what order, and the safe edits to them."""
