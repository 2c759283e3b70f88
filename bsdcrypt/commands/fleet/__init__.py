"""Moved to bsdcrypt.cli.fleet: re-exported here until every branch has merged the move."""

from bsdcrypt.cli.fleet import *  # noqa: F403
