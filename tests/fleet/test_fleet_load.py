"""fleet-audit stays right under load (issue 11, item 5): a host is judged by its own worker's time, never by
how far behind the main loop is in taking results, and the run never has more workers than --parallel.

Nothing here needs sshd: the hosts are closed ports on 127.9.0.0/16 (refused at once) or fakes.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bsdcrypt.fleet import Auditor, FleetOptions, HostResult, Progress, failed_status, run_fleet
from bsdcrypt.fleet import run as fleet_run
from bsdcrypt.hostsfile import HostEntry, parse_hosts

NO_KNOWN_HOSTS = "Host *\n    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile none\n"


def closed_ports(n: int) -> str:
    """n distinct hosts where nothing listens (port 9 of 127.9.x.y): each is refused at once."""
    return "".join(f"root@127.9.{i // 250}.{i % 250 + 1}:9\n" for i in range(n))


class Counting(Auditor):
    """An Auditor that records which threads audit and how many audits run at once."""

    def __init__(self, options: FleetOptions, audit: Callable[[HostEntry], HostResult] | None = None) -> None:
        super().__init__(options)
        self.threads: set[int] = set()
        self.at_once = self.most_at_once = 0
        self._lock = threading.Lock()
        self._fake = audit

    def probe(self, entry: HostEntry, on_host: Any = None) -> Any:  # what each worker runs for its host
        with self._lock:
            self.threads.add(threading.get_ident())
            self.at_once += 1
            self.most_at_once = max(self.most_at_once, self.at_once)
        try:
            return self._fake(entry) if self._fake else super().probe(entry, on_host)
        finally:
            with self._lock:
                self.at_once -= 1


def _refused(entry: HostEntry) -> HostResult:
    reason = f"connection refused by {entry.host} port {entry.port}"
    return HostResult(entry, failed_status(entry, "refused", reason), 0.001, reason, "refused")


class StalledProgress(Progress):
    """A controller that falls behind: its first update takes `stall` seconds (a terminal that blocks, a
    main thread starved of the CPU), while the workers go on finishing hosts."""

    def __init__(self, total: int, stall: threading.Event) -> None:
        super().__init__(total, enabled=True, stream=open("/dev/null", "w"))  # noqa: SIM115
        self.stall = stall
        self.updates = 0

    def update(self, done: int, failed: int, force: bool = False) -> None:
        self.updates += 1
        if self.updates == 1:
            self.stall.wait()
        super().update(done, failed, force)


@pytest.mark.slow
@pytest.mark.parametrize(("hosts", "parallel"), [(20, 1), (200, 4), (600, 32)])
def test_a_backlog_of_results_never_times_a_finished_host_out(
    monkeypatch: pytest.MonkeyPatch, hosts: int, parallel: int
) -> None:
    """Every host finishes at once, but the main loop is held up (longer than timeout + grace) before it
    takes the first result: each row still says what its host did (refused), and the run never starts
    more workers than --parallel. It used to declare every finished host still waiting in the queue
    timed out, start an extra worker for each, and throw the real results away."""
    monkeypatch.setattr(fleet_run, "GRACE", 0.2)
    all_done, stall = threading.Event(), threading.Event()
    count = [0]
    lock = threading.Lock()

    def audit(entry: HostEntry) -> HostResult:
        with lock:
            count[0] += 1
            if count[0] == hosts:
                all_done.set()
        return _refused(entry)

    def controller_catches_up() -> None:  # once every host is done and well past its deadline + grace
        all_done.wait(60)
        threading.Event().wait(1.0)
        stall.set()

    opts = FleetOptions(parallel=parallel, timeout=0.3)
    auditor = Counting(opts, audit)
    progress = StalledProgress(hosts, stall)
    threading.Thread(target=controller_catches_up, daemon=True).start()
    run = run_fleet(parse_hosts(closed_ports(hosts), "h").entries, opts, progress=progress, auditor=auditor)
    kinds = Counter(r.error_kind for r in run.results)
    assert kinds == Counter({"refused": hosts}), kinds
    assert len(auditor.threads) <= parallel and run.workers <= parallel
    assert auditor.most_at_once <= parallel


@pytest.mark.slow
def test_a_host_stuck_past_its_grace_is_given_up_without_a_worker_beyond_parallel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host that ignores abort (a hung resolver) is given up as timed out; its worker is not replaced
    (that would be a thread beyond --parallel): it takes the next host once it comes back."""
    release = threading.Event()

    def audit(entry: HostEntry) -> HostResult:
        if entry.host == "127.9.0.1":
            release.wait(30)  # stuck far past timeout + grace; let go only after being given up
        return _refused(entry)

    opts = FleetOptions(parallel=2, timeout=0.3)
    auditor = Counting(opts, audit)
    original = fleet_run.timed_out

    def given_up(*args: Any) -> HostResult:
        release.set()  # the stuck worker comes back now and goes on with the next hosts
        return original(*args)

    monkeypatch.setattr(fleet_run, "timed_out", given_up)
    run = run_fleet(parse_hosts(closed_ports(8), "h").entries, opts, auditor=auditor)
    by = {r.entry.host: r.error_kind for r in run.results}
    assert by.pop("127.9.0.1") == "timeout"
    assert set(by.values()) == {"refused"} and len(by) == 7
    assert len(auditor.threads) <= 2 and run.workers == 2


@pytest.mark.slow
def test_closed_ports_under_cpu_hogs_are_refused_not_timed_out(tmp_path: Path) -> None:
    """Item 5's reproduction, in CI time: 10,000 closed loopback ports audited at -j 32 while two busy
    loops hold both cores. Every row must say `refused` (it used to be ~95% `timeout`, "the host did not
    give up when aborted"), and no more than 32 workers may ever run."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text(NO_KNOWN_HOSTS)
    n, parallel = 10_000, 32
    opts = FleetOptions(parallel=parallel, timeout=10, ssh_config=str(cfg))
    auditor = Counting(opts)
    entries = parse_hosts(closed_ports(n), "h").entries
    auditor.prepare(entries, strict=True)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        run = run_fleet(entries, opts, auditor=auditor, dedupe=True)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    kinds = Counter(r.error_kind for r in run.results)
    assert kinds == Counter({"refused": n}), kinds
    assert len(auditor.threads) <= parallel and run.workers <= parallel
    assert auditor.most_at_once <= parallel
