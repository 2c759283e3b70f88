"""fleet-audit under CPU load: false timeouts and worker threads, this tree vs an older commit (issue 11).

    python benchmarks/fleet_load_bench.py [--hosts 10000] [--parallel 32] [--timeout 10] [--hogs 2]
                                          [--baseline d895270] [--repeat 1]

Audits `--hosts` closed loopback ports (port 9 of 127.9.x.y: each refused at once) with `run_fleet`, while
`--hogs` busy-loop processes hold the CPU, once with this tree's code and once with `--baseline`'s
(extracted with `git archive`), each in a process of its own. Reports the rows' kinds (all should be
`refused`), the distinct threads that audited hosts, the most worker threads alive at once (sampled
every 50 ms), and wall time. Nothing leaves 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, subprocess, sys, threading, time
sys.path.insert(0, @TREE@)
from collections import Counter
from bsdcrypt.fleet import Auditor, FleetOptions, run_fleet
from bsdcrypt.hostsfile import parse_hosts

n, parallel, timeout, hogs, cfg = @N@, @PARALLEL@, @TIMEOUT@, @HOGS@, @CFG@
text = "".join(f"root@127.9.{i // 250}.{i % 250 + 1}:9\n" for i in range(n))
threads, lock = set(), threading.Lock()

class Counting(Auditor):
    def audit(self, entry, on_host=None):  # what a worker runs for its host, before the batched assessment
        with lock:
            threads.add(threading.get_ident())
        return super().audit(entry, on_host)

    def probe(self, entry, on_host=None):  # since then
        with lock:
            threads.add(threading.get_ident())
        return super().probe(entry, on_host)

peak, stop = [0], threading.Event()
def sample():
    while not stop.wait(0.05):
        peak[0] = max(peak[0], sum(1 for t in threading.enumerate() if t.name == "fleet-worker"))
threading.Thread(target=sample, daemon=True).start()
opts = FleetOptions(parallel=parallel, timeout=timeout, ssh_config=cfg)
auditor = Counting(opts)
entries = parse_hosts(text, "h").entries
auditor.prepare(entries)
busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
try:
    start = time.monotonic()
    run = run_fleet(entries, opts, auditor=auditor, dedupe=True)
    wall = time.monotonic() - start
finally:
    for b in busy:
        b.kill()
    stop.set()
print(json.dumps({"rows": dict(Counter(r.error_kind for r in run.results)), "audit_threads": len(threads),
                  "peak_workers_alive": peak[0], "wall_s": round(wall, 1)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--baseline", default="d895270")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bsdcrypt-load-bench-"))
    base = work / "baseline"
    base.mkdir()
    archive = work / "baseline.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), args.baseline, "bsdcrypt", "fixtures"],
                   check=True)
    subprocess.run(["tar", "-xf", str(archive), "-C", str(base)], check=True)
    cfg = work / "ssh_config"
    cfg.write_text("Host *\n    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile none\n")
    trees = {"this tree": REPO, f"baseline {args.baseline}": base}
    rows = []
    for _ in range(args.repeat):
        for name, tree in trees.items():
            values = {"TREE": repr(str(tree)), "N": str(args.hosts), "PARALLEL": str(args.parallel),
                      "TIMEOUT": str(args.timeout), "HOGS": str(args.hogs), "CFG": repr(str(cfg))}
            code = CHILD
            for key, value in values.items():
                code = code.replace(f"@{key}@", value)
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=work, check=True)
            row = {"code": name, "hosts": args.hosts, "parallel": args.parallel, "timeout": args.timeout,
                   **json.loads(out.stdout.splitlines()[-1])}
            rows.append(row)
            print(json.dumps(row))
    from tabulate import tabulate

    cols = ["code", "hosts", "parallel", "timeout", "rows", "audit_threads", "peak_workers_alive", "wall_s"]
    print(tabulate([[r[c] for c in cols] for r in rows], headers=cols, tablefmt="github"))


if __name__ == "__main__":
    main()
