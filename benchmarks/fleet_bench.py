"""fleet-audit on the loopback sshd fleet vs a minimal paramiko thread pool (issue 5).

    python benchmarks/fleet_bench.py [--sizes 50,200,500] [--parallel 32] [--repeat 1]

Starts real sshd processes serving N fake hosts on 127.1.x.y (tests/fleet/loopback.py), then for
each size runs, as separate processes measured with wait4():
  - `bsdcrypt fleet-audit HOSTS -f json -o /dev/null -q` (the whole CLI: start-up, parsing, assessment)
  - benchmarks/fleet_baseline_paramiko.py (connect + one exec + read, no parsing)
and reports wall time, hosts/s, client CPU per host (user+sys of the process / hosts), peak RSS,
and connections / exec requests per host counted in the sshd logs. Nothing leaves 127.0.0.0/8.
Needs root (or the current user) able to run /usr/sbin/sshd.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _loopback() -> Any:
    spec = importlib.util.spec_from_file_location("loopback", REPO / "tests" / "fleet" / "loopback.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["loopback"] = mod
    spec.loader.exec_module(mod)
    return mod


def measure(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1, 2, 3):
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}): {err[-800:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "rc": proc.returncode,
            "out": out, "err": err}  # type: ignore[dict-item]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="50,200,500")
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", help="also write the results as JSON here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    lb = _loopback()
    recs = sorted(glob.glob(str(REPO / "fixtures" / "hosts" / "*.yaml")))
    if not recs:
        raise SystemExit("no recordings in fixtures/hosts")
    work = Path(tempfile.mkdtemp(prefix="bsdcrypt-fleet-bench-"))
    fleet = lb.LoopbackFleet(work / "fleet")
    for i in range(max(sizes)):
        fleet.add(lb.healthy_address(i), "replay", recs[i % len(recs)])
    t0 = time.monotonic()
    fleet.start()
    print(f"{len(fleet.procs)} sshd processes serving {max(sizes)} hosts on port {fleet.port} "
          f"(started in {time.monotonic() - t0:.1f}s)")
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    env["PYTHONPATH"] = str(REPO)
    results: list[dict[str, Any]] = []
    try:
        for n in sizes:
            addrs = list(fleet.hosts)[:n]
            hosts = work / f"hosts-{n}.txt"
            hosts.write_text("".join(f"{fleet.spec(a)}\n" for a in addrs))
            tools = {
                "bsdcrypt fleet-audit": [
                    sys.executable, "-c", "from bsdcrypt.cli import main; main()", "fleet-audit", str(hosts),
                    "-F", str(fleet.ssh_config), "-f", "json", "-o", str(work / "report.json"), "-q",
                    "--parallel", str(args.parallel), "--timeout", "60",
                ],
                "minimal paramiko": [
                    sys.executable, str(REPO / "benchmarks" / "fleet_baseline_paramiko.py"), str(hosts),
                    str(fleet.known_hosts), str(fleet.client_key), str(args.parallel),
                ],
            }
            for name, cmd in tools.items():
                for _ in range(args.repeat):
                    mark = fleet.log_mark()
                    m = measure(cmd, env)
                    time.sleep(0.5)
                    conns, execs = fleet.counts(mark)
                    one_each = all(conns[a] == 1 and execs[a] == 1 for a in addrs)
                    failed = None
                    if name.startswith("bsdcrypt"):
                        doc = json.loads((work / "report.json").read_text())
                        failed = doc["fleet"]["failed"]
                    row = {
                        "tool": name, "hosts": n, "parallel": args.parallel, "wall_s": round(m["wall"], 2),
                        "hosts_per_s": round(n / m["wall"], 1), "cpu_ms_per_host": round(1000 * m["cpu"] / n, 2),
                        "cpu_s": round(m["cpu"], 2), "peak_rss_mb": round(m["rss_mb"], 1),
                        "connections": sum(conns[a] for a in addrs), "execs": sum(execs[a] for a in addrs),
                        "one_conn_one_exec_each": one_each, "failed": failed,
                    }
                    results.append(row)
                    print(json.dumps(row))
    finally:
        fleet.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    from tabulate import tabulate

    cols = ["tool", "hosts", "wall_s", "hosts_per_s", "cpu_ms_per_host", "peak_rss_mb", "connections", "execs",
            "one_conn_one_exec_each"]
    print(tabulate([[r[c] for c in cols] for r in results], headers=cols, tablefmt="github"))


if __name__ == "__main__":
    main()
