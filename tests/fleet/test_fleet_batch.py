"""fleet-audit assesses its hosts in the run's own thread, in batches (fleet/run.py ASSESS_BATCH): every
host still gets the row `bsdcrypt status` would give it, a reply that is not the probe's is an error row,
and an interrupt counts the hosts whose output was in as done."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from bsdcrypt.errors import HostError
from bsdcrypt.fleet import Auditor, FleetOptions, run_fleet
from bsdcrypt.fleet import run as fleet_run
from bsdcrypt.fleet.results import FleetInterrupted
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


def test_every_host_is_assessed_in_the_runs_thread_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    class A(Auditor):
        def make_host(self, entry: Any) -> Host:
            return _recording(entry)

    entries = parse_hosts("".join(f"h{i}.example\n" for i in range(40)), "h").entries
    threads: list[int] = []
    batches: list[int] = []
    assess, assess_waiting = fleet_run._assess, fleet_run._Run.assess_waiting

    def spy_assess(*args: Any) -> Any:
        threads.append(threading.get_ident())
        return assess(*args)

    def spy_batch(self: Any) -> None:
        batches.append(len(self.waiting))
        assess_waiting(self)

    monkeypatch.setattr(fleet_run, "_assess", spy_assess)
    monkeypatch.setattr(fleet_run._Run, "assess_waiting", spy_batch)
    opts = FleetOptions(parallel=4, timeout=30)
    run = run_fleet(entries, opts, auditor=A(opts))
    assert threads == [threading.get_ident()] * 40
    assert sum(batches) == 40 and max(batches) <= fleet_run.ASSESS_BATCH
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


class _Waits:
    """A host that answers only when aborted."""

    name = spec = "slow.example"

    def __init__(self) -> None:
        self.aborted = threading.Event()

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        self.aborted.wait(60)
        raise HostError("aborted")

    def abort(self) -> None:
        self.aborted.set()

    def close(self) -> None:
        pass


def test_an_interrupt_counts_the_hosts_whose_output_was_in_as_done(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while 5 hosts wait for their assessment and one is in flight: the 5 are assessed and counted
    done, the slow one is in flight, the rest never started."""
    class A(Auditor):
        def make_host(self, entry: Any) -> Host:
            return _Waits() if entry.host == "slow.example" else _recording(entry)  # type: ignore[return-value]

    take = fleet_run._Run.take

    def interrupted_take(self: Any, i: int, res: Any) -> None:
        take(self, i, res)
        if len(self.waiting) == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(fleet_run._Run, "take", interrupted_take)
    entries = parse_hosts("slow.example\n" + "".join(f"h{i}.example\n" for i in range(5)), "h").entries
    opts = FleetOptions(parallel=6, timeout=60)
    with pytest.raises(FleetInterrupted) as caught:
        run_fleet(entries, opts, auditor=A(opts))
    assert (caught.value.done, caught.value.in_flight, caught.value.not_started) == (5, 1, 0)
