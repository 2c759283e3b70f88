"""Moved to bsdcrypt.cli.userland: re-exported here until every branch has merged the move."""

from bsdcrypt.cli.userland import *  # noqa: F403
