"""Both SSH paths against the real sshd of the loopback fleet (issue 25), and what must never hang
(issue 26): a silent host, a FIFO where a known_hosts or config file should be."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from bsdcrypt.fleet import FleetOptions, run_fleet
from bsdcrypt.hostsfile import parse_hosts

from .conftest import FleetEnv
from .test_fleet_sshd import EXPECTED_KIND, bsdcrypt, by_target

TIMEOUT = 10.0  # per host; the slow host is left out (it would only wait)


def _audit(env: FleetEnv, tmp_path: Path, ssh: str, *extra: str) -> dict[str, Any]:
    fl = env.fleet
    specs = [env.spec(a) for a in list(env.healthy)[:3]]
    specs += [env.spec(a) for a, kind in env.faulty.items() if kind != "slow"]
    specs += [env.spec(fl.closed_addr), env.spec(fl.silent_addr)]
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("\n".join(specs) + "\n")
    out = tmp_path / f"{ssh}.json"
    proc = bsdcrypt("fleet-audit", str(hosts), "-F", str(fl.ssh_config), "-t", str(TIMEOUT), "--ssh", ssh,
                    "-f", "json", "-o", str(out), "-q", *extra)
    assert out.exists(), proc.stderr
    return by_target(json.loads(out.read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("ssh", ["paramiko", "openssh"])
def test_both_paths_give_the_same_rows(loopback_fleet: FleetEnv, tmp_path: Path, ssh: str) -> None:
    env = loopback_fleet
    rows = _audit(env, tmp_path, ssh)
    for addr in list(env.healthy)[:3]:
        assert rows[env.spec(addr)]["fleet"]["error"] is None, rows[env.spec(addr)]["fleet"]
    for addr, kind in env.faulty.items():
        if kind == "slow":
            continue
        row = rows[env.spec(addr)]["fleet"]
        assert row["error_kind"] == EXPECTED_KIND[kind], (ssh, addr, row)
        assert not any(ord(c) < 32 for c in row["error"]), row["error"]  # escaped, one line
    closed = rows[env.spec(env.fleet.closed_addr)]["fleet"]
    assert closed["error_kind"] == "refused", closed
    silent = rows[env.spec(env.fleet.silent_addr)]["fleet"]
    assert silent["error_kind"] == "no-ssh" and "banner" in silent["error"], silent


@pytest.mark.slow
def test_the_healthy_rows_of_both_paths_are_identical(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    env = loopback_fleet
    a, b = _audit(env, tmp_path, "paramiko"), _audit(env, tmp_path, "openssh")
    for addr in list(env.healthy)[:3]:
        ra, rb = dict(a[env.spec(addr)]), dict(b[env.spec(addr)])
        ra.pop("fleet"), rb.pop("fleet")
        assert ra == rb, addr


def test_a_host_ca_is_never_trust_on_first_use(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    """known_hosts holds only `@cert-authority` for the host: the paramiko path cannot check a host
    certificate, so the row says so and names --ssh openssh, and known_hosts stays byte-identical even
    with --accept-new."""
    fl = loopback_fleet.fleet
    addr = next(iter(loopback_fleet.healthy))
    ca = (fl.workdir / "other_host_ed25519_key.pub").read_text().split()
    kh = tmp_path / "known_hosts"
    kh.write_bytes(f"@cert-authority [{addr}]:{fl.port} {ca[0]} {ca[1]}\n".encode())
    before = kh.read_bytes()
    cfg = tmp_path / "ssh_config"
    cfg.write_text(fl.ssh_config.read_text().replace(str(fl.known_hosts), str(kh)))
    run = run_fleet(parse_hosts(f"{loopback_fleet.spec(addr)}\n", "h").entries,
                    FleetOptions(timeout=TIMEOUT, ssh_config=str(cfg), accept_new=True))
    r = run.results[0]
    assert r.error_kind == "unsupported", r.error
    assert "--ssh openssh" in (r.error or "") and "@cert-authority" in (r.error or ""), r.error
    assert kh.read_bytes() == before


def test_a_certificate_file_in_the_config_is_refused_not_ignored(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    fl = loopback_fleet.fleet
    addr = next(iter(loopback_fleet.healthy))
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host *\n    CertificateFile {tmp_path}/id-cert.pub\n" + fl.ssh_config.read_text())
    run = run_fleet(parse_hosts(f"{loopback_fleet.spec(addr)}\n", "h").entries,
                    FleetOptions(timeout=TIMEOUT, ssh_config=str(cfg)))
    r = run.results[0]
    assert r.error_kind == "unsupported" and "CertificateFile" in (r.error or ""), r.error
    assert "--ssh openssh" in (r.error or "")


@pytest.mark.slow
@pytest.mark.parametrize("ssh", ["paramiko", "openssh"])
def test_a_fifo_config_is_one_line_not_a_hang(tmp_path: Path, ssh: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Include {fifo}\n")
    hosts = tmp_path / "hosts"
    hosts.write_text("root@127.5.0.1:1\n")
    start = time.monotonic()
    r = bsdcrypt("fleet-audit", str(hosts), "-F", str(cfg), "--ssh", ssh, "-q")
    assert r.returncode == 3 and r.stdout == "", r.stderr
    assert r.stderr.count("\n") == 1 and f"{fifo}: it is a FIFO" in r.stderr, r.stderr
    assert time.monotonic() - start < 100  # the CLI's 120 s net is the only bound; a hang would reach it


def test_a_fifo_known_hosts_is_a_row_naming_it(tmp_path: Path) -> None:
    fifo = tmp_path / "known_hosts"
    os.mkfifo(fifo)
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host *\n    UserKnownHostsFile {fifo}\n    GlobalKnownHostsFile none\n")
    run = run_fleet(parse_hosts("root@127.5.0.1:1\n", "h").entries, FleetOptions(timeout=30, ssh_config=str(cfg)))
    r = run.results[0]
    assert r.error_kind == "config" and f"{fifo}: it is a FIFO" in (r.error or ""), r.error


@pytest.mark.slow
@pytest.mark.parametrize("ssh", ["paramiko", "openssh"])
def test_status_on_a_silent_host_ends_at_the_connect_timeout(
    loopback_fleet: FleetEnv, tmp_path: Path, ssh: str
) -> None:
    """A host that accepts TCP and never sends a banner: `status --host` ends at ConnectTimeout with one
    line saying so, not after its 120 s probe timeout."""
    fl = loopback_fleet.fleet
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    ConnectTimeout 2\n" + fl.ssh_config.read_text())
    start = time.monotonic()
    env = {"BSDCRYPT_SSH_CONFIG": str(cfg)} if ssh == "paramiko" else {}
    args = ["status", "--host", loopback_fleet.spec(fl.silent_addr), "--ssh", ssh]
    r = bsdcrypt(*args, env=env)
    elapsed = time.monotonic() - start
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "banner" in (r.stdout + r.stderr), (r.stdout, r.stderr)
    assert elapsed < 100, elapsed


@pytest.mark.slow
def test_a_slow_banner_is_noted_while_waiting(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    """While a host has not sent its banner, the note callback (a line on a terminal for --host) is told
    once, naming the host, before the connect deadline ends the wait with a no-ssh error."""
    from bsdcrypt.ssh import SSHContext, SSHError, SSHHost

    fl = loopback_fleet.fleet
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    ConnectTimeout 4\n" + fl.ssh_config.read_text())
    notes: list[str] = []
    host = SSHHost.from_spec(loopback_fleet.spec(fl.silent_addr), SSHContext(str(cfg)), timeout=60,
                             on_slow=notes.append)
    try:
        with pytest.raises(SSHError) as caught:
            host.run("true")
    finally:
        host.close()
    assert caught.value.kind == "no-ssh", str(caught.value)
    assert len(notes) == 1 and fl.silent_addr in notes[0] and "banner" in notes[0], notes


@pytest.mark.slow
def test_a_silent_host_is_noted_on_the_openssh_path(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    """ssh shows no progress, so the note is told once when ssh has printed nothing for a few seconds,
    naming the host; the connect deadline still ends the wait with one row."""
    from bsdcrypt.ssh import SSHError
    from bsdcrypt.ssh.openssh import OpenSSHContext, OpenSSHHost

    fl = loopback_fleet.fleet
    notes: list[str] = []
    host = OpenSSHHost.from_spec(loopback_fleet.spec(fl.silent_addr), OpenSSHContext(str(fl.ssh_config)),
                                 timeout=10, on_slow=notes.append)
    try:
        with pytest.raises(SSHError):
            host.run("true")
    finally:
        host.close()
    assert len(notes) == 1 and fl.silent_addr in notes[0] and "nothing yet" in notes[0], notes


@pytest.mark.parametrize(("name", "answer", "close", "kinds"), [
    ("binary-noise", b"\x00\xff\xfe\x1b]0;owned\x07\x1b[31m\x80\x81\n", False, {"no-ssh"}),
    ("http-then-close", b"HTTP/1.1 400 Bad Request\r\n\r\n", True, {"no-ssh", "closed"}),
    ("closes-at-once", b"", True, {"closed"}),
])
def test_a_listener_that_is_not_sshd_on_the_openssh_path(
    tmp_path: Path, name: str, answer: bytes, close: bool, kinds: set[str]
) -> None:
    """The hostile-listener cases through the system ssh: a row of the right kind, ssh's words escaped
    (no control character reaches the row), within the deadline."""
    from bsdcrypt.ssh import SSHError
    from bsdcrypt.ssh.openssh import OpenSSHContext, OpenSSHHost

    from .test_fleet_hostile import Listener

    listener = Listener(lambda conn: conn.sendall(answer) if answer else None, close)
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile none\n")
    host = OpenSSHHost.from_spec(f"root@127.6.0.1:{listener.port}", OpenSSHContext(str(cfg)), timeout=8)
    try:
        with pytest.raises(SSHError) as caught:
            host.run("true")
    finally:
        host.close()
        listener.shutdown()
    err = caught.value
    assert err.kind in kinds, (name, str(err))
    assert not any(ord(c) < 32 or ord(c) == 127 for c in str(err)), repr(str(err))
