"""fleet-audit against pyinfra on a faulty fleet of hosts that really run the probe (issue 25).

    python benchmarks/fleet_pyinfra_bench.py --pyinfra PATH [--hosts 500] [--faulty 0.1 | --flood 0.3]
                                             [--flood-mb 16] [--rounds 2] [--parallel 32] [--deadline 600]
                                             [--tools bsdcrypt,openssh,pyinfra] [--json out.json]

pyinfra is no dependency of bsdcrypt: install it in a virtualenv of its own and name its executable,
    python3 -m venv /tmp/venv-pyinfra && /tmp/venv-pyinfra/bin/pip install pyinfra
    python benchmarks/fleet_pyinfra_bench.py --pyinfra /tmp/venv-pyinfra/bin/pyinfra
Needs root (chroot, a private network namespace), /usr/sbin/sshd and cc, like benchmarks/fleet_bench.py,
whose machinery it uses.

The fleet: `--hosts` loopback addresses in a private network namespace. The healthy ones are real sshd
(tests/fleet/loopback.py) whose hosts run the command they are sent with /bin/sh in a chroot that
answers like one of the recordings in fixtures/hosts (benchmarks/fakehosts.py). A `--faulty` share,
spread evenly over the hosts file, fails the way hosts of a real fleet do, in equal numbers:
  refused       nothing listens on the address (the connection is refused: a host down, sshd stopped)
  blackhole     accepts TCP and never sends a banner (a hung sshd, a firewall that answers the handshake)
  auth-refused  sshd does not accept the key (authorized_keys holds another)
  changed-key   known_hosts holds another host key (a reinstalled host, or a man in the middle)
  garbage       logs in, and answers any command with noise and no probe output (a broken host)
With `--flood SHARE` instead (issue 11's hostile fleet, benchmarks/fleet_hostile_bench.py): that share of the
hosts answers any command with `--flood-mb` MB of random bytes, the rest are healthy.

Tools, each a separate process measured with wait4 (wall time; CPU user+sys of it and its children:
the openssh path's ssh processes included; peak RSS; started by benchmarks/rusage.py, so that the RSS
is the tool's own), in the order A B C, then C B A:
  - `bsdcrypt fleet-audit HOSTS -F CONFIG -f json -o FILE -q --parallel N` (the default `--ssh paramiko`)
  - the same with `--ssh openssh`
  - pyinfra the way an admin runs one command on an inventory and reads what comes back:
    `pyinfra -y --parallel N --config config.py inventory.py exec -- SCRIPT`, SCRIPT being bsdcrypt's
    probe text (bsdcrypt.probe.build_script); pyinfra runs it with `sh -c` on every host and prints each
    host's output, line by line prefixed with the host's name.
Both tools read the same ssh_config (user, key, known_hosts file, StrictHostKeyChecking yes; pyinfra
is also given `ssh_strict_host_key_checking: "yes"` in the inventory, as its own default, accept-new,
would otherwise override the config) and wait as long for a host that does not answer: bsdcrypt's
default, 15 s for the connect and the banner; pyinfra's config.py sets `CONNECT_TIMEOUT = 15` (its
default is 10 s; pyinfra passes it to paramiko's SSHClient.connect, which bounds the TCP connect and
the session negotiation, banner included, by it; paramiko's own banner timeout is 15 s).

What each got back is counted, so a tool that gives up early is not "faster": for bsdcrypt, the report's
rows (hosts whose status equals the one their recording must give, and error rows by kind); for pyinfra,
the hosts whose printed output holds every probe step the fake host answers (the same step names and
exit statuses as the probe run in that chroot locally), the hosts with other output, and the rest. A run
still going after `--deadline` seconds is killed and counted as it stands (pyinfra 3.10 waits forever on a
flood host: its reader dies on the first byte that is not UTF-8, the host's window fills, the exit status
never comes).
Also counted: connections and exec requests in the sshd logs, and the load average before and after
every run. Nothing leaves 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fakehosts  # noqa: E402
import fleet_bench  # noqa: E402

from bsdcrypt import probe  # noqa: E402
from bsdcrypt.ssh.limits import DEFAULT_CONNECT_TIMEOUT  # noqa: E402

REPO = fleet_bench.REPO
CONNECT_TIMEOUT = int(DEFAULT_CONNECT_TIMEOUT)  # bsdcrypt's wait for the connect and the banner
FAULTS = ("refused", "blackhole", "auth-refused", "changed-key", "garbage")


def measure(cmd: list[str], env: dict[str, str], cwd: Path, out: Path, err: Path, deadline: int) -> dict[str, Any]:
    """One run with its output in files (pyinfra prints every host's output): wall time, CPU and peak RSS
    from wait4 in benchmarks/rusage.py (a small process of its own: a child of this process, which holds
    the parsed outputs, would report this process's peak RSS as its own). `phases`: when each of
    pyinfra's "--> " stage lines appeared on stderr, in seconds from the start (read every 0.2 s). A run
    still going after `deadline` seconds is killed (`killed`)."""
    import subprocess
    import threading
    import time

    load0 = os.getloadavg()[0]
    ru = out.with_suffix(".rusage.json")
    phases: dict[str, float] = {}
    done = threading.Event()

    def watch(start: float) -> None:
        seen = 0
        while not done.wait(0.2):
            with err.open("rb") as fh:
                fh.seek(seen)
                chunk = fh.read()
            cut = chunk.rfind(b"\n") + 1
            seen += cut
            for line in chunk[:cut].decode(errors="replace").splitlines():
                if line.startswith("--> "):
                    phases.setdefault(line[4:].rstrip(".:"), round(time.monotonic() - start, 1))

    with out.open("wb") as fo, err.open("wb") as fe:
        watcher = threading.Thread(target=watch, args=(time.monotonic(),), daemon=True)
        watcher.start()
        rusage = [sys.executable, "-S", str(REPO / "benchmarks" / "rusage.py"), str(ru), "--deadline", str(deadline)]
        subprocess.run([*rusage, *cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, check=True)
        done.set()
        watcher.join()
    m = json.loads(ru.read_text())
    return {"wall": m["wall_s"], "rc": m["rc"], "cpu": m["cpu_s"], "rss_mb": m["maxrss_mb"], "load_before": load0,
            "load_after": os.getloadavg()[0], "phases": phases, "killed": m["killed"]}


def layout(n: int, share: float, kinds: tuple[str, ...] = FAULTS) -> dict[int, str]:
    """Which host indexes are faulty, and how: spread evenly, the kinds in turn."""
    count = round(n * share)
    return {int(k * n / count): kinds[k % len(kinds)] for k in range(count)} if count else {}


def bsdcrypt_rows(report: Path, kind_of: dict[str, str], expect: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What fleet-audit's JSON report holds: hosts whose status is the expected one, error rows by kind,
    and what went wrong where (a healthy host with an error row or another status; a faulty host without
    an error row)."""
    doc = json.loads(report.read_text())
    rows: Counter[str] = Counter()
    wrong: list[str] = []
    for h in doc["hosts"]:
        addr = h["fleet"]["target"].rsplit("@", 1)[-1].rsplit(":", 1)[0]
        kind = kind_of[addr]
        if h["fleet"]["error"]:
            rows[f"error {h['fleet']['error_kind']}"] += 1
            if kind == "healthy":
                wrong.append(f"{addr}: {h['fleet']['error_kind']}: {h['fleet']['error'][:120]}")
        elif kind != "healthy":
            rows["no error"] += 1
            wrong.append(f"{addr} ({kind}): no error row")
        elif fleet_bench._strip(h) == expect[addr]:
            rows["answered"] += 1
        else:
            rows["other status"] += 1
            wrong.append(f"{addr}: status differs from its recording's")
    return {"rows": len(doc["hosts"]), "counts": dict(sorted(rows.items())), "wrong": wrong}


def pyinfra_rows(log: str, names: list[str], kind_of: dict[str, str], token: str,
                 steps_of: dict[str, dict[str, int]]) -> dict[str, Any]:
    """What pyinfra printed (on stderr): every output line as "[NAME]" + padding to the longest name + " " +
    line, and its status lines indented ("    [NAME] Connected", "    [NAME] Success", "    [NAME] SSH host
    key error (...)"). A host answered when its output lines, put back together, hold every step its
    chroot answers, with the same exit statuses; any other host is counted by pyinfra's last status line
    (its words up to the first parenthesis)."""
    width = max(len(n) for n in names)
    alt = "|".join(re.escape(n) for n in names)
    output_line, status_line = re.compile(r"^\[(" + alt + r")\]"), re.compile(r"^    \[(" + alt + r")\] +(.*)$")
    lines: dict[str, list[str]] = {n: [] for n in names}
    said: dict[str, str] = {}
    for line in log.split("\n"):
        if m := output_line.match(line):
            lines[m.group(1)].append(line[width + 3:])
        elif (m := status_line.match(line)) and m.group(2) not in ("Connected", "Ready: shell"):
            said[m.group(1)] = m.group(2)
    rows: Counter[str] = Counter()
    wrong: list[str] = []
    for name in names:
        kind, got = kind_of[name], lines[name]
        answered = False
        if got and kind == "healthy":
            ev = probe.parse_output(("\n".join(got) + "\n").encode(), token)
            answered = {k: s.rc for k, s in ev.steps.items()} == steps_of[name]
        if answered:
            rows["answered"] += 1
            continue
        status = said.get(name, "no status line").split(" (")[0]
        if got:
            status += ", output not the probe's"
        rows[status] += 1
        if kind == "healthy":
            wrong.append(f"{name}: {said.get(name)}: {(got or [''])[-1][:120]}")
        elif status.startswith("Success"):
            wrong.append(f"{name} ({kind}): pyinfra says {said.get(name)}")
    return {"counts": dict(sorted(rows.items())), "wrong": wrong}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pyinfra", default="pyinfra", help="the pyinfra executable (a virtualenv of its own)")
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--faulty", type=float, default=0.1, help="the share of faulty hosts (their kinds in turn)")
    ap.add_argument("--flood", type=float, default=0.0,
                    help="instead of --faulty: the share of hosts answering --flood-mb MB of random bytes")
    ap.add_argument("--flood-mb", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--deadline", type=int, default=600, help="kill a tool's run after this many seconds")
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--tools", default="bsdcrypt,openssh,pyinfra")
    ap.add_argument("--json", help="also write every run as JSON here")
    args = ap.parse_args()
    fleet_bench.enter_private_netns("fleet_pyinfra_bench.py")
    run(args)


def run(args: argparse.Namespace) -> None:
    import shutil
    import subprocess

    pyinfra = shutil.which(args.pyinfra)
    if "pyinfra" in args.tools.split(",") and pyinfra is None:
        raise SystemExit(f"no pyinfra executable {args.pyinfra!r}: see this script's docstring to install it")
    lb = fleet_bench._loopback()
    recs = sorted((REPO / "fixtures" / "hosts").glob("*.yaml"))
    work = Path(tempfile.mkdtemp(prefix="bsdcrypt-pyinfra-bench-"))
    roots: dict[Path, Path] = {}
    for rec in list(recs):
        try:
            root = fakehosts.build_root(work, rec)
            fakehosts.check_root(root, rec)
        except fakehosts.Unmodelled as exc:
            print(f"left out, not modelled by the fake hosts: {rec.stem} ({exc})")
            recs.remove(rec)
            continue
        roots[rec] = root
    if args.flood and args.faulty:
        raise SystemExit("--flood and --faulty are two fleets: give one of them (--faulty 0 --flood 0.3)")
    faulty = layout(args.hosts, args.flood, ("flood",)) if args.flood else layout(args.hosts, args.faulty)
    names = [lb.healthy_address(i) for i in range(args.hosts)]
    kind_of = {a: faulty.get(i, "healthy") for i, a in enumerate(names)}
    fleet = lb.LoopbackFleet(work / "fleet", blackholes=[a for a in names if kind_of[a] == "blackhole"],
                             flood_bytes=args.flood_mb * 1_000_000)
    rec_of: dict[str, Path] = {}
    for i, addr in enumerate(names):
        kind = kind_of[addr]
        if kind == "healthy":
            rec_of[addr] = recs[i % len(recs)]
            fleet.add(addr, "chroot", rec_of[addr], root=roots[rec_of[addr]])
        elif kind in ("auth-refused", "garbage", "flood"):
            fleet.add(addr, kind)
        elif kind == "changed-key":
            fleet.add(addr, "wrong-key")
        # refused: nothing listens there; blackhole: the fleet's silent listeners
    fleet.start()
    print(f"{args.hosts} hosts on port {fleet.port}, {len(fleet.procs)} sshd processes; faulty: "
          + ", ".join(f"{k} {v}" for k, v in sorted(Counter(faulty.values()).items())), flush=True)
    expected, _ = fleet_bench.expected_statuses(recs, roots)
    expect = {a: expected[r] for a, r in rec_of.items()}
    token = probe.new_token()
    script = probe.build_script(token)
    steps_by_rec = {r: {k: s.rc for k, s in probe.parse_output(fakehosts.run_probe(roots[r], script), token)
                        .steps.items()} for r in recs}
    steps_of = {a: steps_by_rec[r] for a, r in rec_of.items()}
    config = work / "ssh_config"
    config.write_text(fleet.ssh_config.read_text() + "    StrictHostKeyChecking yes\n")
    hosts = work / "hosts.txt"
    hosts.write_text("".join(f"{fleet.spec(a)}\n" for a in names))
    # pyinfra's own config file: the connect timeout (default 10 s) set to bsdcrypt's default, 15 s
    pyinfra_config = work / "pyinfra_config.py"
    pyinfra_config.write_text(f"from pyinfra import config\n\nconfig.CONNECT_TIMEOUT = {CONNECT_TIMEOUT}\n")
    inventory = work / "inventory.py"
    inventory.write_text(
        f"hosts = (\n    {names!r},\n    {{\n        'ssh_port': {fleet.port},\n"
        f"        'ssh_config_file': {str(config)!r},\n        'ssh_strict_host_key_checking': 'yes',\n    }},\n)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", fleet_bench.IN_NETNS)}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "bsdcrypt")], check=True,
                   env={k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"})
    report = work / "report.json"
    audit = [sys.executable, "-c", "from bsdcrypt.cli import main; main()", "fleet-audit", str(hosts), "-F",
             str(config), "-f", "json", "-o", str(report), "-q", "--parallel", str(args.parallel)]
    tools: dict[str, list[str]] = {}
    for tool in args.tools.split(","):
        if tool == "bsdcrypt":
            tools["bsdcrypt"] = audit
        elif tool == "openssh":
            tools["bsdcrypt --ssh openssh"] = [*audit, "--ssh", "openssh"]
        elif tool == "pyinfra":
            tools["pyinfra exec"] = [str(pyinfra), "-y", "--parallel", str(args.parallel), "--config",
                                     str(pyinfra_config), str(inventory), "exec",
                                     "--", script]
    healthy = sum(1 for k in kind_of.values() if k == "healthy")
    results: list[dict[str, Any]] = []
    try:
        for rnd in range(args.rounds):
            order = list(tools.items())
            if rnd % 2:
                order.reverse()
            for name, cmd in order:
                report.unlink(missing_ok=True)
                mark = fleet.log_mark()
                out, err = work / "out.txt", work / "err.txt"
                py_env = dict(env, PYTHONPATH=str(REPO)) if name.startswith("bsdcrypt") else \
                    {k: v for k, v in env.items() if k != "PYTHONPATH"}
                m = measure(cmd, py_env, work, out, err, args.deadline)
                conns, execs = fleet.settled_counts(mark)
                if name.startswith("bsdcrypt"):
                    got = bsdcrypt_rows(report, kind_of, expect) if report.exists() else \
                        {"counts": {}, "wrong": [f"no report (exit {m['rc']}): {err.read_text()[-300:]}"]}
                else:
                    text = err.read_text(errors="replace") + out.read_text(errors="replace")
                    got = pyinfra_rows(text, names, kind_of, token, steps_of)
                row = {"tool": name, "round": rnd + 1, "hosts": args.hosts, "healthy": healthy,
                       "wall_s": round(m["wall"], 2), "cpu_s": round(m["cpu"], 2),
                       "cpu_ms_per_host": round(1000 * m["cpu"] / args.hosts, 2), "peak_rss_mb": round(m["rss_mb"], 1),
                       "exit": m["rc"], "killed_at_deadline": m["killed"], "answered": got["counts"].get("answered", 0),
                       "rows": got["counts"],
                       "connections": sum(conns.values()), "execs": sum(execs.values()),
                       "load_before": round(m["load_before"], 2), "load_after": round(m["load_after"], 2),
                       **({"phases": m["phases"]} if m["phases"] else {}),
                       "wrong": got["wrong"][:5], "wrong_count": len(got["wrong"])}
                results.append(row)
                print(json.dumps(row), flush=True)
    finally:
        fleet.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    summarize(results)


def _mm(values: list[float], digits: int = 1) -> str:
    return f"{round(statistics.median(values), digits)} ({round(min(values), digits)}–{round(max(values), digits)})"


def summarize(results: list[dict[str, Any]]) -> None:
    from tabulate import tabulate

    names = list(dict.fromkeys(r["tool"] for r in results))
    rows = []
    for name in names:
        rs = [r for r in results if r["tool"] == name]
        rows.append([name, len(rs), _mm([r["wall_s"] for r in rs]), _mm([r["cpu_s"] for r in rs]),
                     _mm([r["peak_rss_mb"] for r in rs]), _mm([r["answered"] for r in rs], 0),
                     sum(r["killed_at_deadline"] for r in rs)])
    print(tabulate(rows, headers=["tool", "rounds", "wall s", "CPU s", "peak RSS MB", "answered", "killed at deadline"],
                   tablefmt="github"))
    base = [r for r in results if r["tool"] == "pyinfra exec"]
    for name in names:
        ours = [r for r in results if r["tool"] == name]
        if name == "pyinfra exec" or len(ours) != len(base):
            continue
        ratios = [b["wall_s"] / a["wall_s"] for a, b in zip(ours, base, strict=True)]
        print(f"pyinfra wall / {name} wall, per round: " + ", ".join(f"{x:.2f}" for x in ratios))


if __name__ == "__main__":
    main()
