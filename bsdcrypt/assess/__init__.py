"""Facts -> Status: the assessment, by subject."""

from bsdcrypt.assess.core import assess

__all__ = ["assess"]
