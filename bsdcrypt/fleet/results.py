"""fleet-audit's results: one row per host, the run, and the interrupt that ends a run early."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bsdcrypt.errors import fleet_remedy
from bsdcrypt.hostsfile import HostEntry
from bsdcrypt.interrupts import Interrupted
from bsdcrypt.status import EXIT_CODES, Status, error_status, worst_verdict

VERDICT_ORDER = {"critical": 0, "warning": 1, "unknown": 2, "ok": 3}  # table: needing action first


@dataclass
class HostResult:
    """One row of the fleet: the host's Status (a synthetic one when it failed)."""

    entry: HostEntry
    status: Status
    elapsed: float
    error: str | None = None
    error_kind: str | None = None

    @property
    def target(self) -> str:
        return self.entry.spec

    @property
    def verdict(self) -> str:
        return self.status.verdict

    def to_dict(self) -> dict[str, Any]:
        """The `status --format json` schema, plus a `fleet` member for this run."""
        data = self.status.to_dict()
        data["fleet"] = {
            "target": self.target,
            "source_line": self.entry.source,
            "error": self.error,
            "error_kind": self.error_kind,
            "elapsed_s": round(self.elapsed, 3),
        }
        return data


def failed_status(entry: HostEntry, kind: str, reason: str) -> Status:
    return error_status(
        entry.host or entry.spec, entry.ssh_spec, f"fleet-{kind}", reason, fleet_remedy(kind)
    )


@dataclass
class FleetRun:
    results: list[HostResult]
    elapsed: float
    parallel: int
    timeout: float
    duplicates: list[str] = field(default_factory=list)
    workers: int = 0  # worker threads the run started (at most `parallel`)

    @property
    def verdict(self) -> str:
        return worst_verdict([r.verdict for r in self.results])

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def totals(self) -> dict[str, int]:
        out = {v: 0 for v in ("critical", "warning", "unknown", "ok")}
        for r in self.results:
            out[r.verdict] = out.get(r.verdict, 0) + 1
        return out

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if r.error is not None)


class FleetInterrupted(Interrupted):
    """Ctrl-C or SIGTERM during a fleet run; raised by run_fleet once the hosts in flight were aborted
    and their ProxyCommands killed, with what the run had got to."""

    def __init__(self, signame: str = "SIGINT") -> None:
        super().__init__(signame)
        self.counted = False  # set by run_fleet: the interrupt came while hosts were being audited
        self.done = 0
        self.in_flight = 0
        self.not_started = 0

    def describe(self) -> str:
        if not self.counted:
            return f"interrupted by {self.signame}"
        return (f"interrupted by {self.signame}: {self.done} host{'' if self.done == 1 else 's'} done, "
                f"{self.in_flight} in flight aborted, {self.not_started} not started")
