"""gather -> parse -> assess: the one path from a Host to a Status. The caller closes the host."""

from __future__ import annotations

from dataclasses import dataclass

from bsdcrypt.assess import assess_facts
from bsdcrypt.hostapi import Host
from bsdcrypt.parse import HostFacts, parse
from bsdcrypt.probe import Evidence, gather, parse_output, run_probe
from bsdcrypt.status import Status


@dataclass(frozen=True)
class Reading:
    """One reading of a host: what the probe gathered, what it shows, and the assessment."""

    evidence: Evidence
    facts: HostFacts
    status: Status


def read_host(host: Host, timeout: float | None = None) -> Reading:
    """Probe `host` once, parse what came back, assess it. `host` stays open: its caller closes it."""
    evidence = gather(host, timeout=timeout)
    facts = parse(evidence)
    return Reading(evidence, facts, assess_facts(facts, host.name, host.spec))


def status_of(host: Host, timeout: float | None = None) -> Status:
    """The Status of `host` (read_host's; the caller closes the host)."""
    return read_host(host, timeout).status


def probe_host(host: Host, timeout: float | None = None) -> tuple[bytes, str]:
    """status_of's first half, for a caller that assesses elsewhere (fleet-audit assesses its hosts in
    batches, in one thread): the probe's framed output and its token. The caller closes the host."""
    return run_probe(host, timeout)


def status_from(output: bytes, token: str, name: str, spec: str) -> Status:
    """status_of's second half: frame, parse and assess what probe_host returned."""
    return assess_facts(parse(parse_output(output, token)), name, spec)
