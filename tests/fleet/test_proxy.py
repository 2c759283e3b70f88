"""ProxyCommand: descriptors above FD_SETSIZE, the shell it runs under, what it leaves behind, and how
its failures read. Real commands throughout; the loopback sshd where a connection must succeed."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bsdcrypt.fleet import FleetOptions, run_fleet
from bsdcrypt.hostsfile import parse_hosts

from .conftest import FleetEnv

RELAY = "bash -c 'exec 3<>/dev/tcp/%h/%p; cat <&3 & exec cat >&3'"  # bash's /dev/tcp: numeric addresses only


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, session) of a process, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[2]), int(fields[3])


def alive(pid: int) -> bool:
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")  # an orphan's zombie may wait for a lazy init


def session_members(sids: set[int]) -> list[int]:
    """Live processes (not zombies) whose session is one of `sids`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st is not None and st[2] in sids and st[0] not in ("Z", "X"):
                found.append(int(entry))
    return found


def wait_until(cond: object, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(cond())  # type: ignore[operator]


def _config(tmp_path: Path, body: str) -> Path:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(body + "Host *\n    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile none\n")
    return cfg


# ---------------------------------------------------------------------------- descriptors above 1024


@pytest.fixture
def high_fds() -> Iterator[int]:
    """Fill every descriptor below 1100, so that what is opened next is above FD_SETSIZE (1024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1300
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {want}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    dummies: list[int] = []
    try:
        while True:
            fd = os.open(os.devnull, os.O_RDONLY)
            dummies.append(fd)
            if fd >= 1100:
                break
        yield dummies[-1]
    finally:
        for fd in dummies:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.slow
def test_a_proxy_command_works_with_descriptors_above_fd_setsize(
    loopback_fleet: FleetEnv, tmp_path: Path, high_fds: int
) -> None:
    """-j 400 with ProxyCommands puts pipes above 1024, where select() fails ("closed the connection during
    banner"): the whole audit goes through a real relay to the loopback sshd with every new fd > 1100."""
    from bsdcrypt.ssh import SSHContext, SSHHost

    fl = loopback_fleet.fleet
    target, rec = list(loopback_fleet.healthy.items())[6]
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host relay-1\n    HostName {target}\n    Port {fl.port}\n    ProxyCommand {RELAY}\n\n"
                   + fl.ssh_config.read_text())
    host = SSHHost("relay-1", context=SSHContext(str(cfg)), timeout=30)
    try:
        transport = host.connect()
        assert transport.is_authenticated()
        proxy = host.proxy
        assert proxy is not None and proxy.sock.fileno() > high_fds  # the test tests what it says
    finally:
        host.close()
    run = run_fleet(parse_hosts("relay-1\n", "h").entries, FleetOptions(timeout=30, ssh_config=str(cfg)))
    r = run.results[0]
    assert r.error is None, r.error
    assert r.status.host == "relay-1"


# ---------------------------------------------------------------------------- the shell


def test_the_proxy_command_runs_under_shell_like_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ssh(1) runs `$SHELL -c "exec COMMAND"` ($SHELL unset or empty: /bin/sh), and so does bsdcrypt."""
    from bsdcrypt.ssh.sockets import ProxyCommand

    log = tmp_path / "shell.log"
    shell = tmp_path / "myshell"
    shell.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {log}\necho >> {log}\nexec /bin/sh "$@"\n')
    shell.chmod(0o755)

    def first_line(command: str) -> bytes:
        proxy = ProxyCommand(command, 1 << 20)
        try:
            proxy.sock.settimeout(10)
            return proxy.sock.recv(100)
        finally:
            proxy.close()

    monkeypatch.setenv("SHELL", str(shell))
    assert first_line("echo hello") == b"hello\n"
    assert log.read_text() == "-c|exec echo hello|\n"
    for unset in (True, False):
        if unset:
            monkeypatch.delenv("SHELL")
        else:
            monkeypatch.setenv("SHELL", "")
        assert first_line("echo $0") == b"/bin/sh\n"
    assert log.read_text().count("\n") == 1  # the wrapper ran only while $SHELL named it


# ---------------------------------------------------------------------------- what a proxy leaves behind


@pytest.mark.slow
@pytest.mark.parametrize("leader", ["exits", "hangs-up"])
def test_what_a_proxy_command_left_behind_is_killed(tmp_path: Path, leader: str) -> None:
    """The command exits (leaving a child in its process group that keeps the pipes open), or exits after
    its child closed them: either way closing the host kills the child too.

    The command itself writes its child's pid ($!, known as soon as it forked) before it exits, so the
    pid is on file before the host can see the command end and close: the test does not depend on the
    child getting to run before the close (under load it often did not, and there was no pid to check).
    """
    pidfile = tmp_path / "child.pid"
    redirect = "" if leader == "exits" else " >&- 2>&-"
    command = f"""sh -c 'sh -c "exec sleep 60"{redirect} & echo $! > {pidfile}.new && mv {pidfile}.new {pidfile}; exit 0'"""
    cfg = _config(tmp_path, f"Host gw-*\n    HostName 127.0.0.1\n    ProxyCommand {command}\n")
    # "exits" ends at the deadline (the child holds the output open): 4s is only a safety net for the
    # command to fork and write one file on a loaded machine; "hangs-up" ends when the command does.
    run = run_fleet(parse_hosts("root@gw-1\n", "h").entries, FleetOptions(timeout=4, ssh_config=str(cfg)))
    r = run.results[0]
    # a timeout (the child holds the output open) or a proxy row (the input has no reader left: sh gives a
    # background job /dev/null as its stdin), depending on who is first; the point is what is left after
    assert r.error_kind in ("timeout", "proxy"), r.error
    assert pidfile.exists(), "the ProxyCommand did not get to fork its child"
    child = int(pidfile.read_text())
    assert wait_until(lambda: not alive(child), 30), f"the ProxyCommand's child {child} survived"


@pytest.mark.slow
def test_relay_left_by_a_proxy_command_is_killed_after_a_normal_run(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    """bash's `cat <&3 &` relay outlives the command (`exec cat >&3` ends when the input closes): after
    a successful audit nothing of the ProxyCommand's session is left."""
    fl = loopback_fleet.fleet
    target = list(loopback_fleet.healthy)[7]
    sids = tmp_path / "sids"
    relay = f"bash -c 'echo $$ >> {sids}; exec 3<>/dev/tcp/%h/%p; cat <&3 & exec cat >&3'"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host relay-2\n    HostName {target}\n    Port {fl.port}\n    ProxyCommand {relay}\n\n"
                   + fl.ssh_config.read_text())
    run = run_fleet(parse_hosts("relay-2\n", "h").entries, FleetOptions(timeout=30, ssh_config=str(cfg)))
    assert run.results[0].error is None, run.results[0].error
    sid = {int(sids.read_text().split()[0])}
    assert wait_until(lambda: not session_members(sid), 5), session_members(sid)


# ---------------------------------------------------------------------------- how failures read


def test_connect_timeout_through_a_proxy_command_names_the_proxy(tmp_path: Path) -> None:
    """ConnectTimeout bounds the banner wait through a ProxyCommand too (as in ssh), but nothing 'accepted
    TCP' here: the row is a timeout naming the ProxyCommand and quoting its stderr."""
    cfg = _config(
        tmp_path,
        "Host gw-*\n    HostName 127.0.0.1\n    ConnectTimeout 1\n"
        "    ProxyCommand sh -c 'echo dialing %h >&2; exec sleep 60'\n",
    )
    start = time.monotonic()
    run = run_fleet(parse_hosts("root@gw-1\n", "h").entries, FleetOptions(timeout=300, ssh_config=str(cfg)))
    elapsed = time.monotonic() - start
    r = run.results[0]
    assert r.error_kind == "timeout", r.error
    error = r.error or ""
    assert "after 1s (ConnectTimeout)" in error and "ProxyCommand" in error, error
    assert "dialing 127.0.0.1" in error and "accepted TCP" not in error, error
    assert elapsed < 150, elapsed  # the 1 s ConnectTimeout, not the host's 300 s timeout


def test_an_emptied_group_is_never_signalled_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a killpg found the ProxyCommand's group empty and its leader is reaped, the group id may be
    reused by an unrelated process group: later closes and aborts send nothing to it."""
    from bsdcrypt.ssh.sockets import ProxyCommand

    proxy = ProxyCommand("true", 1 << 20)
    proxy.process.wait(10)  # the leader exited and is reaped; its group is empty
    proxy.close()  # its killpg gets ESRCH
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: sent.append((pgid, sig)))
    proxy.kill()
    proxy.close()
    assert sent == []
