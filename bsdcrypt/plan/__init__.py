"""Moved to bsdcrypt.enable.plan: re-exported here until every branch has merged the move."""

from bsdcrypt.enable.plan import *  # noqa: F403
