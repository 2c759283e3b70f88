"""Parse, assessment and JSON-ready dict of the shipped recordings, in a tight loop.

    python benchmarks/assess_loop.py [--loops 40]

A diagnostic beside fleet_phases.py: the per-host cost of what fleet-audit does after the SSH
session (`probe.parse_output`, `assess`, `Status.to_dict`), without the network. Each recording's
probe output is rendered once, then parsed and assessed as a host's would be. Prints ms of thread
CPU a host, median and min of 7 passes; `--profile` prints cProfile's top functions instead.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bsdcrypt import recording  # noqa: E402
from bsdcrypt.assess import assess  # noqa: E402
from bsdcrypt.probe import parse_output, render  # noqa: E402

TOKEN = "BENCH"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--loops", type=int, default=40)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    outputs = [render(recording.load(p)[1], TOKEN) for p in sorted((REPO / "fixtures" / "hosts").glob("*.yaml"))]

    def once() -> None:
        for out in outputs:
            assess(parse_output(out, TOKEN), "host", "ssh").to_dict()

    for _ in range(3):
        once()
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(lambda: [once() for _ in range(args.loops)])
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return
    per_host = []
    for _ in range(7):
        t0 = time.thread_time()
        for _ in range(args.loops):
            once()
        per_host.append((time.thread_time() - t0) / args.loops / len(outputs) * 1000)
    print(f"{len(outputs)} recordings x {args.loops} loops: "
          f"{statistics.median(per_host):.3f} ms a host (min {min(per_host):.3f})")


if __name__ == "__main__":
    main()
