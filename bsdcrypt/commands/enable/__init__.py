"""Moved to bsdcrypt.cli.enable: re-exported here until every branch has merged the move."""

from bsdcrypt.cli.enable import *  # noqa: F403
