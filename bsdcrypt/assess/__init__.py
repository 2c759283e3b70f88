"""Facts -> Status: the assessment, by subject."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bsdcrypt.assess.consumers import add_consumers
from bsdcrypt.assess.core import assess as _assess
from bsdcrypt.status import Status, by_severity

if TYPE_CHECKING:
    from bsdcrypt.probe import Evidence

__all__ = ["assess"]


def assess(ev: Evidence, host: str, source: str) -> Status:
    """The Status of a host from its evidence; its findings most severe first (every report lists
    them in this order: text, JSON, YAML, HTML, the fleet's rows)."""
    status = add_consumers(ev, _assess(ev, host, source))  # kernel crypto consumers (issue 27)
    status.findings = by_severity(status.findings)
    return status
