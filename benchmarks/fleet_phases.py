"""Where fleet-audit's client CPU goes, phase by phase, on the fleet of benchmarks/fleet_bench.py.

    python benchmarks/fleet_phases.py [--hosts 48] [--passes 5]

A diagnostic, not a goal figure (docs/performance.md): the goals are judged by fleet_bench.py, whole
processes side by side. This audits the benchmark's fake hosts (one per recording it can model, then
again) one after the other in one thread, through the code fleet-audit runs for each host
(`fleet.run.Auditor.audit`, then the JSON report of `render.fleet`), and adds up `time.thread_time()`
spent in each phase, found by wrapping the functions at their module (nothing is re-implemented):
SSH (`SSHHost.run`: connect, key exchange, login, exec, reading the output), framing
(`probe.parse_output`), assessment (`assess`), and the report (`render.fleet.render(run, "json")`).
What no phase holds (building each host, the audit's bookkeeping) is "other". No worker threads, so
no GIL handoffs: fleet_bench's figures are higher by those. Needs root (as fleet_bench.py).
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import fleet_bench  # noqa: E402

spent: dict[str, float] = {}


def timed(phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[phase] = spent.get(phase, 0.0) + time.thread_time() - t0
    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=48)
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    fleet_bench.enter_private_netns("fleet_phases.py")

    from bsdcrypt import pipeline, probe
    from bsdcrypt.fleet.results import FleetRun
    from bsdcrypt.fleet.run import Auditor, FleetOptions
    from bsdcrypt.hostsfile import read_hosts
    from bsdcrypt.render import fleet as render_fleet
    from bsdcrypt.ssh import client as ssh_host

    work = Path(tempfile.mkdtemp(prefix="bsdcrypt-fleet-phases-"))
    fleet = fleet_bench.healthy_fleet(work, args.hosts)
    try:
        entries = read_hosts("".join(f"{fleet.spec(a)}\n" for a in fleet.hosts))
        auditor = Auditor(FleetOptions(ssh_config=str(fleet.ssh_config), timeout=120))
        auditor.prepare(entries)
        for e in entries[:4]:  # warm: first connections, lazily built tables
            auditor.audit(e)
        ssh_host.SSHHost.run = timed("ssh", ssh_host.SSHHost.run)  # type: ignore[method-assign]
        pipeline.parse_output = timed("framing", probe.parse_output)
        # parse + assess, as pipeline.read_host calls them (one after the other: both count as assessment)
        pipeline.parse = timed("assessment", pipeline.parse)
        pipeline.assess_facts = timed("assessment", pipeline.assess_facts)
        render = timed("report", render_fleet.render)
        totals: list[float] = []
        per_pass: list[dict[str, float]] = []
        for _ in range(args.passes):
            spent.clear()
            t0 = time.thread_time()
            results = []
            for e in entries:
                r = auditor.audit(e)
                if r.error:
                    raise SystemExit(f"{e.spec}: {r.error}")
                results.append(r)
            render(FleetRun(results, 1.0, 1, 120.0), "json")
            total = time.thread_time() - t0
            totals.append(total)
            per_pass.append(dict(spent, other=total - sum(spent.values())))
    finally:
        fleet.stop()
        shutil.rmtree(work, ignore_errors=True)
    n = len(entries)
    print(f"{n} hosts x {args.passes} passes, one thread; ms of thread CPU a host, median (min-max) of the passes:")
    for phase in ("ssh", "framing", "assessment", "report", "other"):
        vals = [1000 * p.get(phase, 0.0) / n for p in per_pass]
        print(f"  {phase:11s} {statistics.median(vals):6.3f} ({min(vals):.3f}-{max(vals):.3f})")
    vals = [1000 * t / n for t in totals]
    print(f"  {'total':11s} {statistics.median(vals):6.3f} ({min(vals):.3f}-{max(vals):.3f})")


if __name__ == "__main__":
    main()
