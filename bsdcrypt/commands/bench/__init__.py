"""Moved to bsdcrypt.cli.bench: re-exported here until every branch has merged the move."""

from bsdcrypt.cli.bench import *  # noqa: F403
