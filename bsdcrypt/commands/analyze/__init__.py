"""Moved to bsdcrypt.cli.analyze: re-exported here until every branch has merged the move."""

from bsdcrypt.cli.analyze import *  # noqa: F403
