"""The floor of `--ssh openssh`'s own CPU: the least a Python process can spend a host on the same work.

    python benchmarks/openssh_floor.py [--hosts 500] [--parallel 32] [--rounds 2]

A diagnostic for issue 25's "CPU in bsdcrypt's own process <= 1 ms a host" (docs/performance.md). On the
fleet of fleet_bench.py (real sshd, each host running the real probe in its chroot), it does what
fleet-audit `--ssh openssh` must do for each host, with nothing else: one thread, no pool, no watchdog, no
deadline timers, no error rows; ssh started with the argv bsdcrypt gives it (`OpenSSHContext.argv`), the
probe written to its stdin, stdout and stderr read through one selector, the output framed, parsed and
assessed 16 hosts in a row (`pipeline.status_from`), and the JSON report of all hosts (`to_dict`,
`json.dumps(indent=2)`). Prints this process's CPU (getrusage(RUSAGE_SELF), its ssh children not
included) a host, in parts: starting ssh, the I/O loop, the analysis, the report. Beside it, in the same
run, fleet-audit's own figure: `fleet.run.run_fleet(..., client="openssh")` on the same hosts in this
process (as openssh_phases.py does), the two taking turns. Needs root (as fleet_bench.py).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import fleet_bench  # noqa: E402
from openssh_phases import self_cpu  # noqa: E402


def floor_run(specs: list[tuple[str, str, int]], config: str, parallel: int) -> dict[str, float]:
    """Every host once, the least work; seconds of this process's CPU by part."""
    from bsdcrypt.pipeline import status_from
    from bsdcrypt.probe import build_script, new_token
    from bsdcrypt.ssh.openssh import OpenSSHContext

    ctx = OpenSSHContext(config)
    sel = selectors.DefaultSelector()
    parts = {"start": 0.0, "io": 0.0, "analysis": 0.0, "report": 0.0}
    todo, live = list(specs), 0
    done: list[tuple[str, str, bytes]] = []  # (host, token, output): in, not yet assessed
    statuses: list[Any] = []
    outs: dict[int, tuple[subprocess.Popen[bytes], str, str, bytearray, list[int]]] = {}
    t_all = self_cpu()
    while todo or live or done:
        while todo and live < parallel:
            t0 = self_cpu()
            addr, user, port = todo.pop()
            token = new_token()
            proc = subprocess.Popen(ctx.argv(addr, user, port, 15), bufsize=0, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            proc.stdin.write(build_script(token).encode())  # fits the pipe: no wait
            proc.stdin.close()
            state = (proc, addr, token, bytearray(), [2])
            for pipe in (proc.stdout, proc.stderr):
                os.set_blocking(pipe.fileno(), False)
                outs[pipe.fileno()] = state
                sel.register(pipe.fileno(), selectors.EVENT_READ)
            live += 1
            parts["start"] += self_cpu() - t0
        if len(done) >= 16 or (done and not live):
            t0 = self_cpu()
            statuses += [status_from(out, token, addr, addr) for addr, token, out in done]
            done = []
            parts["analysis"] += self_cpu() - t0
            continue
        t0 = self_cpu()
        for key, _ in sel.select(1.0):
            fd = key.fd
            proc, addr, token, out, open_pipes = outs[fd]
            chunk = os.read(fd, 65536)
            if chunk:
                if proc.stdout is not None and fd == proc.stdout.fileno():
                    out += chunk
                continue
            sel.unregister(fd)
            del outs[fd]
            open_pipes[0] -= 1
            if open_pipes[0] == 0:
                proc.wait()
                for ended in (proc.stdout, proc.stderr):
                    if ended is not None:
                        ended.close()
                live -= 1
                done.append((addr, token, bytes(out)))
        parts["io"] += self_cpu() - t0
    t0 = self_cpu()
    json.dumps({"hosts": [s.to_dict() for s in statuses]}, indent=2)
    parts["report"] += self_cpu() - t0
    parts["all"] = self_cpu() - t_all
    if len(statuses) != len(specs) or any(s.findings and s.findings[0].id.startswith("fleet-") for s in statuses):
        raise SystemExit("a host failed")
    return parts


def fleet_audit_run(entries: list[Any], config: str, parallel: int) -> float:
    """fleet-audit's own work on the same hosts (run_fleet and the JSON report), this process's CPU."""
    from bsdcrypt.fleet.run import FleetOptions, run_fleet
    from bsdcrypt.render import fleet as render_fleet

    t0 = self_cpu()
    run = run_fleet(entries, FleetOptions(parallel=parallel, ssh_config=config, timeout=120, client="openssh"))
    render_fleet.render(run, "json")
    if any(r.error for r in run.results):
        raise SystemExit("a host failed in fleet-audit")
    return self_cpu() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    fleet_bench.enter_private_netns("openssh_floor.py")
    from bsdcrypt.hostsfile import read_hosts

    work = Path(tempfile.mkdtemp(prefix="bsdcrypt-openssh-floor-"))
    fleet = fleet_bench.healthy_fleet(work, args.hosts)
    try:
        config = str(fleet.ssh_config)
        specs = [(a, fleet.user, fleet.port) for a in fleet.hosts]
        entries = read_hosts("".join(f"{fleet.spec(a)}\n" for a in fleet.hosts))
        floor_run(specs[:8], config, args.parallel)  # warm: imports, lazily built tables
        fleet_audit_run(entries[:8], config, args.parallel)
        n = len(specs)
        for r in range(args.rounds):
            runs = [("floor", lambda: floor_run(specs, config, args.parallel)),
                    ("fleet-audit", lambda: {"all": fleet_audit_run(entries, config, args.parallel)})]
            for name, fn in runs if r % 2 == 0 else runs[::-1]:
                w0 = time.monotonic()
                parts = fn()
                shown = ", ".join(f"{k} {1000 * v / n:.3f}" for k, v in parts.items() if k != "all")
                print(f"round {r + 1} {name:11s}: {1000 * parts['all'] / n:.3f} ms a host of own CPU"
                      f"{' (' + shown + ')' if shown else ''}; wall {time.monotonic() - w0:.1f} s", flush=True)
    finally:
        fleet.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
