"""gather -> parse/assess: the one path from a Host to a Status."""

from __future__ import annotations

from bsdcrypt.assess import assess
from bsdcrypt.hostapi import Host
from bsdcrypt.probe import Evidence, gather
from bsdcrypt.status import Status


def gather_evidence(host: Host, timeout: float | None = None) -> Evidence:
    try:
        return gather(host, timeout=timeout)
    finally:
        host.close()


def status_of(host: Host, timeout: float | None = None) -> Status:
    """Probe `host` once and assess what came back."""
    return assess(gather_evidence(host, timeout), host.name, host.spec)
