"""fleet-audit's run as a whole: the ssh config looked up in each host's worker under its deadline
(duplicates found there), and Ctrl-C/SIGTERM ending the run without leaving ProxyCommands behind.
Nothing here needs sshd; every address is on 127.0.0.0/8 and nothing is resolved."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bsdcrypt.fleet import Auditor, FleetOptions, run_fleet
from bsdcrypt.hostsfile import read_hosts

from .test_proxy import alive, session_members, wait_until

REPO = Path(__file__).resolve().parents[2]
NOWHERE = "127.5.0.1"  # nothing listens there: every port is refused at once
NO_KNOWN_HOSTS = "Host *\n    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile none\n"


def cli(*args: str, **extra_env: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"} | extra_env
    return subprocess.Popen(
        [sys.executable, "-c", "from bsdcrypt.cli import main; main()", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
    )


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """The run's stdout and stderr; a run still going after `timeout` (a safety net) is killed first."""
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# ---------------------------------------------------------------------------- config lookups under the deadline


@pytest.mark.slow
def test_match_exec_lookups_run_in_parallel_in_the_workers(tmp_path: Path) -> None:
    """20 hosts whose config lookup (`Match exec`) waits until all 20 lookups have started: the lookups used
    to run one after the other before any host started, which here would hold the first one until its
    deadline (a `timeout` row); run in the hosts' workers, they all start together and every host goes on
    to its connection (refused). An event, not a stopwatch: no bound on how fast the machine is."""
    started = tmp_path / "started"
    cfg = tmp_path / "ssh_config"
    barrier = f"echo x >> {started}; while [ $(wc -l < {started}) -lt 20 ]; do sleep 0.1; done"
    cfg.write_text(f'Match exec "{barrier}"\n    ConnectTimeout 5\n' + NO_KNOWN_HOSTS)
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("".join(f"root@{NOWHERE}:{port}\n" for port in range(1, 21)))
    proc = cli("fleet-audit", str(hosts), "-F", str(cfg), "-t", "60", "-j", "32", "-f", "csv", "-q")
    out, err = finish(proc, 300)
    rows = out.splitlines()[1:]
    assert len(rows) == 20 and all(",refused,connection refused" in r for r in rows), (out, err)
    assert len(started.read_text().split()) >= 20  # every host's lookup ran (a second pass of ssh's may rerun it)


@pytest.mark.slow
def test_a_hanging_match_exec_is_a_timeout_row_not_a_hung_run(tmp_path: Path) -> None:
    """A lookup that never ends (an hour) is cut at the host's deadline: the run returns (the 120 s
    below is only a safety net), each host a timeout row, and the commands do not outlive it."""
    pids = tmp_path / "pids"
    cfg = tmp_path / "ssh_config"
    # a compound command: sleep is the shell's child, not the shell itself
    cfg.write_text(f'Match exec "echo $$ >> {pids}; sleep 3600; true"\n' + NO_KNOWN_HOSTS)
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"root@{NOWHERE}:1\nroot@{NOWHERE}:2\n")
    proc = cli("fleet-audit", str(hosts), "-F", str(cfg), "-t", "1", "-f", "csv", "-q")
    out, err = finish(proc, 120)
    rows = out.splitlines()[1:]
    assert len(rows) == 2 and all(",timeout,timed out after 1s" in r for r in rows), (out, err)
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    assert wait_until(lambda: not any(alive(p) for p in started), 5), "the Match exec commands outlived the run"
    sessions = set(started)  # each command runs in a session of its own, its id the shell's pid
    assert wait_until(lambda: not session_members(sessions), 5), f"left behind: {session_members(sessions)}"


@pytest.mark.parametrize("match_exec", [False, True], ids=["lookups-up-front", "match-exec-in-workers"])
def test_duplicates_are_found_deterministically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, match_exec: bool
) -> None:
    """run_fleet(dedupe=True), as fleet-audit runs it: lines equal as written and replays of one file at
    once; lines the config makes one connection before the run (no Match exec: lookups are cheap) or in
    the workers (Match exec). Either way the lowest line of a group is the one audited, whatever order
    the lookups finish in, and the notes are always the same."""

    def no_dns(*args: object, **kwargs: object) -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)  # every SSH host is a quick `resolve` row
    cfg = tmp_path / "ssh_config"
    cfg.write_text(('Match exec "true"\n    ConnectTimeout 5\n' if match_exec else "")
                   + "Host moved\n    Port 2222\nHost *\n    User root\n" + NO_KNOWN_HOSTS)
    rec = sorted((REPO / "fixtures" / "hosts").glob("*.yaml"))[0]
    (tmp_path / "fleet").mkdir()
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "obsd.yaml").write_text(rec.read_text())
    (tmp_path / "fleet" / "obsd.yaml").symlink_to(tmp_path / "x" / "obsd.yaml")
    text = (
        "fw1\nfw1:22\nroot@fw1\nadmin@fw1\n"  # 2-3 duplicate 1 (port 22, user root by config); 4 is not
        "moved\nmoved:22\nmoved:2222\n"  # 6 is another port than 5; 7 duplicates 5
        "replay:obsd.yaml\nreplay:../x/obsd.yaml\nreplay:no-such.yaml\nreplay:no-such.yaml\nfw1\n"
    )
    entries = read_hosts(text, "h", str(tmp_path / "fleet"))
    expected_notes = [
        "fw1 is listed more than once (h:1, also h:2 as fw1:22, h:3 as root@fw1, h:12); audited once",
        "moved is listed more than once (h:5, also h:7 as moved:2222); audited once",
        "replay:obsd.yaml is listed more than once (h:8, also h:9 as replay:../x/obsd.yaml); audited once",
        "replay:no-such.yaml is listed more than once (h:10, also h:11); audited once",
    ]
    audited = ["fw1", "admin@fw1", "moved", "moved:22", "replay:obsd.yaml", "replay:no-such.yaml"]
    for parallel in (1, 8, 8, 8):
        opts = FleetOptions(ssh_config=str(cfg), parallel=parallel, timeout=10)
        auditor = Auditor(opts)
        run = run_fleet(entries, opts, auditor=auditor, dedupe=True)
        assert [r.entry.spec for r in run.results] == audited, parallel  # input order: the lowest lines
        assert run.duplicates == expected_notes, parallel
        assert {r.error_kind for r in run.results if r.entry.host} == {"resolve"}
    # without dedupe: every line is a row
    assert len(run_fleet(entries, opts, auditor=Auditor(opts)).results) == len(entries)


# ---------------------------------------------------------------------------- Ctrl-C and SIGTERM


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_run_leaves_no_proxy_command_behind(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGTERM is handled like Ctrl-C: every ProxyCommand (a session of its own, which no terminal signal
    reaches) is killed with its whole process group, and the run says so and exits 128 + the signal."""
    if sig == signal.SIGINT and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        pytest.skip("SIGINT is ignored here (and so in the child): nothing to test")
    sids = tmp_path / "sids"
    cfg = tmp_path / "ssh_config"
    # %n: each host's command differs, or the five lines would be one host (the same connection)
    cfg.write_text(f"Host gw-*\n    HostName {NOWHERE}\n    ProxyCommand sh -c 'echo $$ %n >> {sids}; sleep 100'\n"
                   + NO_KNOWN_HOSTS)
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("".join(f"root@gw-{i}\n" for i in range(1, 6)))
    proc = cli("fleet-audit", str(hosts), "-F", str(cfg), "-t", "60", "-j", "3", "-q")
    try:
        assert wait_until(lambda: sids.exists() and len(sids.read_text().splitlines()) == 3, 30), "no proxies"
        started = {int(line.split()[0]) for line in sids.read_text().splitlines()}
        assert session_members(started), "the ProxyCommands are not running"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert out == ""
    name = sig.name
    assert f"bsdcrypt: fleet-audit interrupted by {name}: 0 hosts done, 3 in flight aborted, 2 not started; " \
           "no report written" in err, err
    assert "Traceback" not in err
    assert wait_until(lambda: not session_members(started), 5), f"left behind: {session_members(started)}"
    assert len(sids.read_text().splitlines()) == 3  # no host started after the signal


# ---------------------------------------------------------------------------- single-host commands


@pytest.mark.slow
def test_sigterm_to_status_leaves_no_proxy_command_behind(tmp_path: Path) -> None:
    """`status` (any single-host command over SSH) turns SIGTERM into an interrupt: the host is closed,
    which kills its ProxyCommand's process group (a session of its own), and it exits 143."""
    sids = tmp_path / "sids"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host gw\n    HostName {NOWHERE}\n    ProxyCommand sh -c 'echo $$ >> {sids}; sleep 100'\n"
                   + NO_KNOWN_HOSTS)
    proc = cli("status", "-H", "root@gw", BSDCRYPT_SSH_CONFIG=str(cfg))  # status's --ssh-config
    try:
        assert wait_until(lambda: sids.exists() and sids.read_text().strip(), 30), "no proxy"
        started = {int(sids.read_text().split()[0])}
        assert wait_until(lambda: session_members(started), 5), "the ProxyCommand is not running"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, (proc.returncode, out, err)
    assert "interrupted by SIGTERM" in err and "Traceback" not in err, err
    assert wait_until(lambda: not session_members(started), 5), f"left behind: {session_members(started)}"
