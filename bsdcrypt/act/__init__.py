"""Moved to bsdcrypt.enable.act: re-exported here until every branch has merged the move."""

from bsdcrypt.enable.act import *  # noqa: F403
