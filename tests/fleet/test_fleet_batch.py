"""fleet-audit assesses its hosts in the run's own thread, a few in a row (fleet/run.py ASSESS_BATCH): every
host still gets the row `bsdcrypt status` would give it, and a reply that is not the probe's is an error
row."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

from bsdcrypt.fleet import Auditor, FleetOptions, HostResult, Progress, run_fleet
from bsdcrypt.fleet import run as fleet_run
from bsdcrypt.fleet.run import Probed
from bsdcrypt.hostapi import Host, RunResult
from bsdcrypt.hosts.open import open_host
from bsdcrypt.hostsfile import parse_hosts
from bsdcrypt.pipeline import status_of

RECORDINGS = [
    "freebsd-12.2-bhyve-aesni-flag-hidden",
    "freebsd-12.2-bhyve-aesni-kldloaded-persisted",
    "freebsd-11.0-current-custom-kernel-x-no-aesni",
]


def _recording(entry: Any) -> Host:
    """Host hN.example answers as the recording RECORDINGS[N % 3]."""
    return open_host(f"replay:{RECORDINGS[int(entry.host[1:].split('.')[0]) % 3]}", base_dir="")


def test_every_host_is_assessed_in_the_runs_thread_as_status_would() -> None:
    threads: list[int] = []

    class A(Auditor):
        def make_host(self, entry: Any) -> Host:
            return _recording(entry)

        def assess(self, probed: Probed) -> HostResult:
            threads.append(threading.get_ident())
            return super().assess(probed)

    entries = parse_hosts("".join(f"h{i}.example\n" for i in range(40)), "h").entries
    opts = FleetOptions(parallel=4, timeout=30)
    run = run_fleet(entries, opts, auditor=A(opts))
    assert threads == [threading.get_ident()] * 40
    for result, entry in zip(run.results, entries, strict=True):
        assert result.error is None and result.entry is entry
        assert result.status.to_dict() == status_of(_recording(entry)).to_dict()
    assert len({r.status.to_dict()["driver"]["state"] for r in run.results}) > 1  # not 40 times one host


class _Answers:
    """A host that answers any command with `reply` (exit status 0)."""

    name = spec = "noise.example"

    def __init__(self, reply: bytes) -> None:
        self.reply = reply

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        return RunResult(0, self.reply, b"")

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_reply_that_is_not_the_probes_is_a_garbage_row() -> None:
    class A(Auditor):
        def make_host(self, entry: Any) -> Host:
            return _Answers(b"\x1b[2J no frames here\n")  # type: ignore[return-value]

    opts = FleetOptions(timeout=10)
    run = run_fleet(parse_hosts("noise.example\n", "h").entries, opts, auditor=A(opts))
    (row,) = run.results
    assert row.error_kind == "garbage" and row.status.verdict == "unknown"
    assert "not the output of the bsdcrypt probe" in (row.error or "")


def test_slow_assessments_leave_the_watchdog_a_look_between_them() -> None:
    """A host's output may take seconds to parse (1 MiB files): the run assesses for a quarter of a second
    at most, then the watchdog and the progress line look, then it goes on."""
    events: list[str] = []

    class A(Auditor):
        def make_host(self, entry: Any) -> Host:
            return _recording(entry)

        def assess(self, probed: Probed) -> HostResult:
            events.append("assess")
            time.sleep(fleet_run.ASSESS_BUDGET + 0.05)  # a slow parse: over the budget alone
            return super().assess(probed)

    class Looks(Progress):
        def tick(self) -> None:
            events.append("look")

    entries = parse_hosts("".join(f"h{i}.example\n" for i in range(6)), "h").entries
    opts = FleetOptions(parallel=6, timeout=60)
    run = run_fleet(entries, opts, Looks(6, io.StringIO()), A(opts))
    assert [r.error for r in run.results] == [None] * 6 and events.count("assess") == 6
    assert "assess,assess" not in ",".join(events)
