"""What the probe says about the host a bench runs on: its facts, and whether it can run the GELI bench
at all (GELI and md(4) are FreeBSD's)."""

from __future__ import annotations

from bsdcrypt.bench.model import ST_SYSTEM, BenchError, HostFacts
from bsdcrypt.hostapi import Host
from bsdcrypt.status import Status


def status_for(host: Host) -> Status | None:
    """The status assessment (one read-only probe); None if the probe fails."""
    from bsdcrypt.errors import BsdcryptError
    from bsdcrypt.pipeline import status_of

    try:
        return status_of(host)
    except BsdcryptError:  # the bench still runs with its own sysctl facts
        return None


class NotFreeBSD(BenchError):
    """The probe showed a system without GELI and md(4); `facts` are what it showed."""

    def __init__(self, why: str, facts: HostFacts) -> None:
        super().__init__(ST_SYSTEM, why)
        self.why = why
        self.facts = facts


def facts_for(host: Host) -> HostFacts | None:
    """Host facts from the status assessment; None if the probe fails. NotFreeBSD when the probe
    shows a system other than FreeBSD's family (the GELI bench cannot run there; --userland can)."""
    status = status_for(host)
    if status is None:
        return None
    facts = HostFacts.from_status(status)
    why = not_freebsd(status)
    if why:
        raise NotFreeBSD(why, facts)
    return facts


def not_freebsd(status: Status) -> str | None:
    """Why a host cannot run the GELI bench, when its probe shows a system other than FreeBSD's family
    (GELI and md(4) are FreeBSD's); None when it is one, or when the probe did not say."""
    from bsdcrypt.platform import APPLIANCES, FREEBSD_FAMILY

    name = getattr(getattr(status, "os", None), "name", None)
    variant = getattr(getattr(status, "os", None), "variant", None)
    if name is None or name in FREEBSD_FAMILY or variant in (*APPLIANCES, "hardenedbsd"):
        return None
    return (
        f"{status.host} runs {name}, not FreeBSD: the bench measures GELI on an md(4) device, which only "
        "FreeBSD-family systems have (bench userland measures OpenSSL anywhere)"
    )
