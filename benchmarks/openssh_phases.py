"""Where fleet-audit `--ssh openssh` spends CPU in its own process, on the fleet of fleet_bench.py.

    python benchmarks/openssh_phases.py [--hosts 200] [--parallel 32] [--profile N]

A diagnostic, not a goal figure (the goal is judged by fleet_bench.py, whole processes side by side).
Audits the benchmark's fake hosts (real sshd, each host running the real probe in its chroot) with
`fleet.run.run_fleet` in this process, `client="openssh"`, as the CLI does, then renders the JSON
report. Reports bsdcrypt's own CPU (getrusage(RUSAGE_SELF) delta: every thread of this process, no
ssh children) per host, and `time.thread_time()` per phase, added up over all threads by wrapping
the functions at their module: ssh (`OpenSSHHost.run` in the host's thread: starting ssh, handing it
to the loop, waiting), the rest of each host's probe (`Auditor.probe`, in the workers), framing
(`probe.parse_output`), parse (`parse.parse`) and assessment (`assess_facts`), which the run's own
thread does in batches (fleet/run.py ASSESS_BATCH), the report (`render.fleet.render`); the main thread
(the pool, the watchdog: its CPU without the analysis) and the ssh loop's thread (ssh/driver.py: writing
the script, reading the output) from their own CPU clocks; garbage collections (gc.callbacks) inside
whichever phase triggered them. "not in any thread above": threads come and gone, GIL hand-offs outside
the phases. `--profile N` prints cProfile's N top functions of the hosts' probes (thread CPU time, in
the workers) instead.
Needs root (as fleet_bench.py).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import os
import pstats
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import fleet_bench  # noqa: E402

spent: dict[str, float] = {}
_lock = threading.Lock()
_local = threading.local()


def timed(phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            dt = time.thread_time() - t0
            with _lock:
                spent[phase] = spent.get(phase, 0.0) + dt
    return wrapper


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


_gc_started: dict[int, float] = {}


def _gc_timer(phase: str, info: dict[str, Any]) -> None:
    """gc.callbacks: the thread CPU of each collection, added up as the phase "gc"."""
    if phase == "start":
        _gc_started[threading.get_ident()] = time.thread_time()
    elif (t0 := _gc_started.pop(threading.get_ident(), None)) is not None:
        spent["gc"] = spent.get("gc", 0.0) + time.thread_time() - t0


def thread_cpu(tid: int | None) -> float:
    """user+sys CPU of one thread of this process, from /proc (Linux)."""
    fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--profile", type=int, default=0, help="print cProfile's N top functions of the workers")
    args = ap.parse_args()
    fleet_bench.enter_private_netns("openssh_phases.py")

    from bsdcrypt import parse, pipeline, probe
    from bsdcrypt.fleet.run import Auditor, FleetOptions, run_fleet
    from bsdcrypt.hostsfile import read_hosts
    from bsdcrypt.render import fleet as render_fleet
    from bsdcrypt.ssh import driver as driver_mod
    from bsdcrypt.ssh import openssh

    work = Path(tempfile.mkdtemp(prefix="bsdcrypt-openssh-phases-"))
    fleet = fleet_bench.healthy_fleet(work, args.hosts)
    profiles: list[cProfile.Profile] = []
    try:
        entries = read_hosts("".join(f"{fleet.spec(a)}\n" for a in fleet.hosts))
        options = FleetOptions(parallel=args.parallel, ssh_config=str(fleet.ssh_config), timeout=120,
                               client="openssh")
        auditor = Auditor(options)
        auditor.prepare(entries)
        for e in entries[:4]:  # warm: imports, lazily built tables
            if auditor.audit(e).error:
                raise SystemExit(f"{e.spec}: warm-up failed")
        if args.profile:
            audit = Auditor.probe

            def profiled(self: Auditor, *a: Any, **kw: Any) -> Any:
                prof = getattr(_local, "prof", None)
                if prof is None:
                    prof = _local.prof = cProfile.Profile(time.thread_time)
                    with _lock:
                        profiles.append(prof)
                return prof.runcall(audit, self, *a, **kw)

            Auditor.probe = profiled  # type: ignore[method-assign]
        else:
            openssh.OpenSSHHost.run = timed("ssh", openssh.OpenSSHHost.run)  # type: ignore[method-assign]
            pipeline.parse_output = timed("framing", probe.parse_output)
            pipeline.parse = timed("parse", parse.parse)
            pipeline.assess_facts = timed("assessment", pipeline.assess_facts)
            Auditor.probe = timed("worker", Auditor.probe)  # type: ignore[method-assign]
        render = timed("report", render_fleet.render)
        loop0 = thread_cpu(driver_mod.driver().thread.native_id)
        gc0 = [g["collections"] for g in gc.get_stats()]
        gc.callbacks.append(_gc_timer)
        c0, w0, m0 = self_cpu(), time.monotonic(), time.thread_time()
        main_prof = cProfile.Profile(time.thread_time) if args.profile else None
        run = main_prof.runcall(run_fleet, entries, options, auditor=auditor) if main_prof else \
            run_fleet(entries, options, auditor=auditor)
        main_thread = time.thread_time() - m0
        render(run, "json")
        total, wall = self_cpu() - c0, time.monotonic() - w0
        loop_cpu = thread_cpu(driver_mod.driver().thread.native_id) - loop0
        collections = [g["collections"] - c for g, c in zip(gc.get_stats(), gc0, strict=True)]
        errors = [r.error for r in run.results if r.error]
        if errors:
            raise SystemExit(f"{len(errors)} hosts failed, e.g. {errors[0]}")
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        fleet.stop()
        shutil.rmtree(work, ignore_errors=True)
    n = len(entries)
    kids = children.ru_utime + children.ru_stime
    print(f"{n} hosts, --parallel {args.parallel}, wall {wall:.1f}s; own process (RUSAGE_SELF) "
          f"{1000 * total / n:.3f} ms a host; ssh children so far {1000 * kids / n:.1f} ms a host")
    if args.profile:
        stats = pstats.Stats(profiles[0])
        for p in profiles[1:]:
            stats.add(p)
        stats.sort_stats("tottime").print_stats(args.profile)
        stats.sort_stats("cumulative").print_stats(args.profile)
        if main_prof is not None:
            print("==== the main thread")
            pstats.Stats(main_prof).sort_stats("tottime").print_stats(args.profile // 2)
        return
    print(f"garbage collections during the run, by generation: {collections}, "
          f"{1000 * spent.pop('gc', 0.0) / n:.3f} ms a host (in whichever thread triggered them)")
    print("ms of thread CPU a host, all threads added:")
    worker = spent.pop("worker", 0.0)
    for phase in ("ssh", "framing", "parse", "assessment", "report"):
        print(f"  {phase:11s} {1000 * spent.get(phase, 0.0) / n:6.3f}")
    analysis = sum(spent.get(k, 0.0) for k in ("framing", "parse", "assessment"))
    print(f"  {'rest of each host probe':26s} {1000 * (worker - spent.get('ssh', 0.0)) / n:6.3f}")
    print(f"  {'main thread (pool, watchdog)':26s} {1000 * (main_thread - analysis) / n:6.3f}")
    print(f"  {'the ssh loop thread':26s} {1000 * loop_cpu / n:6.3f}")
    rest = total - worker - main_thread - loop_cpu - spent.get("report", 0.0)
    print(f"  {'not in any thread above':26s} {1000 * rest / n:6.3f}")


if __name__ == "__main__":
    main()
