"""fleet-audit's peak memory with hostile hosts, this tree vs an older commit, in one run (issue 11).

    python benchmarks/fleet_hostile_bench.py [--hosts 500] [--hostile 0.3] [--flood-mb 16] [--parallel 32]
                                             [--baseline d895270] [--repeat 1] [--json out.json]

Starts real sshd processes on 127.x.y.z (tests/fleet/loopback.py) serving `--hosts` fake hosts, of which
the `--hostile` share answer the probe with `--flood-mb` MB of random bytes (`flood` hosts, spread evenly
over the hosts file) and the rest answer with real recordings. Then, alternately, runs
`bsdcrypt fleet-audit HOSTS -f json -o FILE -q` from this tree and from `--baseline` (the commit before
the per-host output cap, extracted with `git archive`), each as a process measured with wait4(): wall
time, CPU, peak RSS, and the rows' error kinds. Nothing leaves 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def measure(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    """One run: wall time, and CPU and peak RSS of that process alone (wait4), taken by benchmarks/rusage.py
    from a small process of its own (a child's ru_maxrss includes the resident size of whoever forked it)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        proc = subprocess.run([sys.executable, "-S", str(REPO / "benchmarks" / "rusage.py"), tmp.name, *cmd],
                              cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        m = json.loads(Path(tmp.name).read_text())
    if m["rc"] not in (0, 1, 2, 3):
        err = proc.stderr.decode(errors="replace")
        raise RuntimeError(f"fleet-audit failed ({m['rc']}): {err[-800:]}")
    return {"wall": m["wall_s"], "cpu": m["cpu_s"], "rss_mb": m["maxrss_mb"]}


def extract(rev: str, dest: Path) -> Path:
    """The bsdcrypt package (and its shipped recordings) as of `rev`, in dest."""
    archive = dest.with_suffix(".tar")
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), rev, "bsdcrypt", "fixtures"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    return dest


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--hostile", type=float, default=0.3)
    ap.add_argument("--flood-mb", type=int, default=16)
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--baseline", default="d895270", help="the commit to compare with (before the cap)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-baseline", action="store_true", help="run this tree only")
    ap.add_argument("--json", help="also write the results as JSON here")
    args = ap.parse_args()
    lb = _load("loopback", REPO / "tests" / "fleet" / "loopback.py")
    recs = sorted(glob.glob(str(REPO / "fixtures" / "hosts" / "*.yaml")))
    work = Path(tempfile.mkdtemp(prefix="bsdcrypt-hostile-bench-"))
    trees = {"this tree": REPO}
    if not args.no_baseline:
        trees[f"baseline {args.baseline}"] = extract(args.baseline, work / "baseline")
    fleet = lb.LoopbackFleet(work / "fleet", flood_bytes=args.flood_mb * 1_000_000)
    hostile = set(round(i / args.hostile) for i in range(int(args.hosts * args.hostile)))
    for i in range(args.hosts):
        addr = lb.healthy_address(i)
        if i in hostile:
            fleet.add(addr, "flood", recs[0])
        else:
            fleet.add(addr, "replay", recs[i % len(recs)])
    t0 = time.monotonic()
    fleet.start()
    print(f"{len(fleet.procs)} sshd processes serving {args.hosts} hosts ({len(hostile)} answering "
          f"{args.flood_mb} MB of garbage) on port {fleet.port} (started in {time.monotonic() - t0:.1f}s)")
    hosts = work / "hosts.txt"
    hosts.write_text("".join(f"{fleet.spec(a)}\n" for a in fleet.hosts))
    results: list[dict[str, Any]] = []
    try:
        for _ in range(args.repeat):
            for name, tree in trees.items():
                env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
                env["PYTHONPATH"] = str(tree)
                report = work / "report.json"
                # the tree first on sys.path: `-c` would put the current folder (this tree) before PYTHONPATH
                code = f"import sys; sys.path.insert(0, {str(tree)!r}); from bsdcrypt.cli import main; main()"
                cmd = [sys.executable, "-c", code, "fleet-audit", str(hosts),
                       "-F", str(fleet.ssh_config), "-f", "json", "-o", str(report), "-q",
                       "--parallel", str(args.parallel), "--timeout", "120"]
                m = measure(cmd, env, work)
                doc = json.loads(report.read_text())
                cap = "the rest was not read" in report.read_text()  # which code ran: only this tree caps
                kinds = Counter(h["fleet"]["error_kind"] or "ok" for h in doc["hosts"])
                row = {"code": name, "hosts": args.hosts, "hostile": len(hostile), "flood_mb": args.flood_mb,
                       "parallel": args.parallel, "wall_s": round(m["wall"], 1), "cpu_s": round(m["cpu"], 1),
                       "peak_rss_mb": round(m["rss_mb"], 1), "rows": dict(sorted(kinds.items())), "capped": cap}
                results.append(row)
                print(json.dumps(row))
    finally:
        fleet.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    from tabulate import tabulate

    cols = ["code", "hosts", "hostile", "wall_s", "cpu_s", "peak_rss_mb", "rows", "capped"]
    print(tabulate([[r[c] for c in cols] for r in results], headers=cols, tablefmt="github"))


if __name__ == "__main__":
    main()
