"""The analysis every fleet-audit host gets, in a tight loop, phase by phase.

    python benchmarks/assess_loop.py [--outputs recordings|fleet] [--loops 20] [--passes 7]
    python benchmarks/assess_loop.py --outputs fleet --before REV [--rounds 4]
    python benchmarks/assess_loop.py --profile [tottime|cumulative]

What a host costs after its SSH session, without the network: framing (`probe.parse_output`),
parsing (`parse.parse`), assessment (`assess.assess_facts`) and the report (`Status.to_dict()` and
`json.dumps(indent=2)`). Each phase is timed in thread CPU around every host's call; printed as ms a
host, the median and min over the passes.

The outputs analysed (`--outputs`):
  - recordings: each recording in fixtures/hosts, framed as the probe would print it;
  - fleet: the real probe outputs of the fake fleet's hosts (benchmarks/fakehosts.py: the chroot of
    each modelled recording, the probe script run there by sh as sshd starts it); needs root and cc.

`--before REV`: the same outputs analysed by this tree and by REV (a `git archive` in a temp folder),
each in its own subprocess, alternated A B A B for `--rounds` rounds (a loaded machine drifts 2x
within minutes; alternation spreads that over both). Both must agree on every host's JSON.
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import hashlib
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TOKEN = "BENCH"
PHASES = ("parse_output", "parse", "assess", "to_dict", "json")


def recording_outputs() -> list[tuple[bytes, str]]:
    from bsdcrypt import recording
    from bsdcrypt.probe import render

    recs = sorted((REPO / "fixtures" / "hosts").glob("*.yaml"))
    return [(render(recording.load(p)[1], TOKEN), TOKEN) for p in recs]


def fleet_outputs() -> list[tuple[bytes, str]]:
    """The probe's output from each modelled recording's chroot (the hosts of fleet_bench's healthy fleet)."""
    if os.geteuid() != 0:
        raise SystemExit("--outputs fleet needs root: the fake hosts are chroots (benchmarks/fakehosts.py)")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import fakehosts

    from bsdcrypt import probe

    out: list[tuple[bytes, str]] = []
    with tempfile.TemporaryDirectory(prefix="bsdcrypt-assess-loop-") as work:
        for rec in sorted((REPO / "fixtures" / "hosts").glob("*.yaml")):
            try:
                root = fakehosts.build_root(Path(work), rec)
            except fakehosts.Unmodelled:
                continue
            token = probe.new_token()
            out.append((fakehosts.run_probe(root, probe.build_script(token)), token))
    return out


def _phases() -> list[Callable[[Any], Any]]:
    """The five steps of a host's analysis, each taking the previous one's result."""
    from bsdcrypt.assess import assess_facts
    from bsdcrypt.parse import parse

    def report(status: Any) -> Any:
        return status.to_dict()

    return [parse, lambda facts: assess_facts(facts, "host", "ssh"), report, lambda d: json.dumps(d, indent=2)]


def measure(outputs: list[tuple[bytes, str]], loops: int, passes: int) -> dict[str, Any]:
    """ms of thread CPU a host for each phase: median and min over `passes` passes of `loops` loops."""
    from bsdcrypt.probe import parse_output

    steps = _phases()
    clock = time.thread_time_ns

    def one_pass(n: int) -> list[int]:
        spent = [0] * len(PHASES)
        for _ in range(n):
            for data, token in outputs:
                t0 = clock()
                value: Any = parse_output(data, token)
                t1 = clock()
                spent[0] += t1 - t0
                for k, step in enumerate(steps, 1):
                    value = step(value)
                    t0, t1 = t1, clock()
                    spent[k] += t1 - t0
        return spent

    one_pass(2)  # warm-up: caches, compiled regexes
    hosts = loops * len(outputs)
    rows = [[ns / hosts / 1e6 for ns in one_pass(loops)] for _ in range(passes)]
    totals = [sum(r) for r in rows]
    figures = {name: [r[k] for r in rows] for k, name in enumerate(PHASES)}
    figures["total"] = totals
    return {name: {"median": statistics.median(v), "min": min(v)} for name, v in figures.items()}


def digest(outputs: list[tuple[bytes, str]]) -> str:
    """One hash of every host's JSON report: the two trees must produce the same bytes."""
    from bsdcrypt.probe import parse_output

    steps = _phases()
    h = hashlib.sha256()
    for data, token in outputs:
        value: Any = parse_output(data, token)
        for step in steps:
            value = step(value)
        h.update(value.encode())
    return h.hexdigest()


def profile(outputs: list[tuple[bytes, str]], loops: int, sort: str) -> None:
    from bsdcrypt.probe import parse_output

    steps = _phases()

    def run() -> None:
        for _ in range(loops):
            for data, token in outputs:
                value: Any = parse_output(data, token)
                for step in steps:
                    value = step(value)

    run()
    prof = cProfile.Profile()
    prof.runcall(run)
    pstats.Stats(prof).sort_stats(sort).print_stats(40)


def _dump(outputs: list[tuple[bytes, str]], path: Path) -> None:
    path.write_text(json.dumps([[base64.b64encode(d).decode(), t] for d, t in outputs]))


def _load(path: Path) -> list[tuple[bytes, str]]:
    return [(base64.b64decode(d), t) for d, t in json.loads(path.read_text())]


def worker(tree: Path, outputs_file: Path, loops: int, passes: int) -> None:
    """In a subprocess: analyse the outputs with the bsdcrypt of `tree`, print the figures as JSON."""
    sys.path.insert(0, str(tree))
    outputs = _load(outputs_file)
    figures = measure(outputs, loops, passes)
    print(json.dumps({"figures": figures, "digest": digest(outputs)}))


def _archive(rev: str, dest: Path) -> None:
    tar = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)


def side_by_side(outputs: list[tuple[bytes, str]], rev: str, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bsdcrypt-assess-before-") as tmp:
        old = Path(tmp) / "tree"
        old.mkdir()
        _archive(rev, old)
        outputs_file = Path(tmp) / "outputs.json"
        _dump(outputs, outputs_file)
        trees = {"this tree": REPO, f"at {rev}": old}
        results: list[tuple[int, str, dict[str, Any]]] = []
        digests: dict[str, str] = {}
        for rnd in range(1, args.rounds + 1):
            order = list(trees) if rnd % 2 else list(reversed(trees))
            for label in order:
                env = dict(os.environ, PYTHONPATH=str(trees[label]))
                cmd = [sys.executable, __file__, "--worker", str(trees[label]), "--outputs-file", str(outputs_file),
                       "--loops", str(args.loops), "--passes", str(args.passes)]
                done = subprocess.run(cmd, env=env, check=False, capture_output=True, text=True)
                if done.returncode != 0:  # e.g. a tree older than bsdcrypt.parse (issue 29)
                    raise SystemExit(f"the analysis {label} failed:\n{done.stderr.strip()[-2000:]}")
                res = json.loads(done.stdout)
                digests[label] = res["digest"]
                results.append((rnd, label, res["figures"]))
                print(f"round {rnd} {label}: total {res['figures']['total']['median']:.3f} ms a host", file=sys.stderr)
    same = len(set(digests.values())) == 1
    print(f"{len(outputs)} outputs, {args.loops} loops x {args.passes} passes a run; "
          f"ms of thread CPU a host, median of the passes (min); JSON reports identical: {'yes' if same else 'NO'}")
    print("| round | tree | " + " | ".join(PHASES) + " | total |")
    print("|---" * (len(PHASES) + 3) + "|")
    for rnd, label, fig in results:
        cells = [f"{fig[p]['median']:.3f} ({fig[p]['min']:.3f})" for p in (*PHASES, "total")]
        print(f"| {rnd} | {label} | " + " | ".join(cells) + " |")
    if not same:
        raise SystemExit("the two trees' JSON reports differ")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--outputs", choices=("recordings", "fleet"), default="recordings")
    ap.add_argument("--loops", type=int, default=20)
    ap.add_argument("--passes", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--before", metavar="REV")
    ap.add_argument("--profile", nargs="?", const="tottime", choices=("tottime", "cumulative"))
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--outputs-file", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        worker(args.worker, args.outputs_file, args.loops, args.passes)
        return
    sys.path.insert(0, str(REPO))
    outputs = fleet_outputs() if args.outputs == "fleet" else recording_outputs()
    if args.before:
        side_by_side(outputs, args.before, args)
    elif args.profile:
        profile(outputs, args.loops, args.profile)
    else:
        fig = measure(outputs, args.loops, args.passes)
        print(f"{len(outputs)} outputs ({args.outputs}) x {args.loops} loops, ms of thread CPU a host, "
              f"median of {args.passes} passes (min):")
        for name in (*PHASES, "total"):
            print(f"  {name:<13}{fig[name]['median']:.3f} ({fig[name]['min']:.3f})")


if __name__ == "__main__":
    main()
