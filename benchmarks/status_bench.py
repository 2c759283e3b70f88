"""How long `bsdcrypt status` takes against a recording, as a user runs it (a fresh process each time).

Goal (issue 2): median <= 0.25 s on the 2-core dev machine. Usage:
    python benchmarks/status_bench.py [--runs 30] [--recording NAME] [--baseline REV]
Prints the median, p90 and max wall time, and the in-process time of gather+assess per recording.

--baseline REV (e.g. HEAD~1, a tag): also run REV's code, checked out in a temporary git worktree,
alternating with this checkout's (A B A B ...) in the same run, so both see the same machine; prints
both and the median of the per-pair ratios this/REV, for the wall time and for the CPU time (user +
system) of each process, which a loaded machine disturbs less.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def wall_times(cmd: list[str], runs: int) -> list[float]:
    return [t for t, _cpu in timed(cmd, runs)]


def timed(cmd: list[str], runs: int) -> list[tuple[float, float]]:
    """(wall, CPU = user + system) seconds of each of `runs` fresh processes."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.append((time.perf_counter() - t0, usage.ru_utime + usage.ru_stime))
    return out


def _cli(checkout: Path) -> list[str]:
    """`bsdcrypt` as this checkout's code (not whichever one is installed)."""
    code = f"import sys; sys.path.insert(0, {str(checkout)!r}); from bsdcrypt.cli import main; main()"
    return [sys.executable, "-c", code]


def _compile(tree: Path) -> None:
    """Bytecode for a tree's package, as an installed one has it: with PYTHONDONTWRITEBYTECODE set (this
    environment sets it) a fresh worktree would otherwise recompile every module at each start, and a
    checkout that has its `__pycache__` would look 25-35 % faster than it is."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "bsdcrypt")], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def side_by_side(baseline: str, recording: str, runs: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bsdcrypt-baseline-") as tmp:
        other = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(other), baseline], check=True)
        try:
            for tree in (ROOT, other):
                _compile(tree)
            for fmt in ("table", "json"):
                args = ["status", "--host", f"replay:{recording}", "--format", fmt]
                a: list[tuple[float, float]] = []
                b: list[tuple[float, float]] = []
                for _ in range(runs):
                    a += timed([*_cli(ROOT), *args], 1)
                    b += timed([*_cli(other), *args], 1)
                for i, what in ((0, "wall"), (1, "CPU ")):
                    ratio = statistics.median(x[i] / y[i] for x, y in zip(a, b, strict=True))
                    print(f"status --format {fmt:5} {what}: this {statistics.median(x[i] for x in a):.3f}s  "
                          f"{baseline} {statistics.median(y[i] for y in b):.3f}s  "
                          f"median ratio this/{baseline} {ratio:.3f}  ({runs} pairs)")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--recording", default="freebsd-12.2-bhyve-geli-software-aesni-kldloaded")
    ap.add_argument("--baseline", help="a git revision to measure side by side with this checkout")
    args = ap.parse_args()
    if args.baseline:
        side_by_side(args.baseline, args.recording, args.runs)
        return
    exe = shutil.which("bsdcrypt") or sys.exit("install bsdcrypt first (pip install -e .)")
    for fmt in ("table", "json"):
        times = sorted(wall_times([exe, "status", "--host", f"replay:{args.recording}", "--format", fmt], args.runs))
        p90 = times[int(len(times) * 0.9) - 1]
        print(f"status --format {fmt:5}: median {statistics.median(times):.3f}s  p90 {p90:.3f}s  max {times[-1]:.3f}s"
              f"  ({args.runs} runs)")
    sys.path.insert(0, str(ROOT))
    from bsdcrypt.hosts.replay import ReplayHost
    from bsdcrypt.pipeline import status_of

    paths = sorted((ROOT / "fixtures" / "hosts").glob("*.yaml"))
    t0 = time.perf_counter()
    for p in paths:
        status_of(ReplayHost.from_file(p))
    per = (time.perf_counter() - t0) / len(paths)
    print(f"in-process load+gather+assess: {per * 1000:.1f} ms per recording ({len(paths)} recordings)")


if __name__ == "__main__":
    main()
