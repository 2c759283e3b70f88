"""Moved to bsdcrypt.cli (one module per command): the old module names re-export their new homes for now."""
