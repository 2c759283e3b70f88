"""Moved to bsdcrypt.interrupts; this name stays until every branch has merged the move."""

from bsdcrypt.interrupts import signals_deferred, sigterm_raises

__all__ = ["signals_deferred", "sigterm_raises"]
