"""bsdcrypt's own SSH client (bsdcrypt/ssh/direct.py, fleet-audit's single run) against OpenSSH's sshd
limited to one algorithm at a time: what the client speaks is used (no fallback), what it does not
speak goes to paramiko (one fallback, same result); RSA user keys sign with rsa-sha2-512, from a key
file and through ssh-agent alike (sshd since 8.8 refuses ssh-rsa's SHA-1 signatures); ECDSA keys too."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bsdcrypt.ssh import SSHContext, SSHHost

from .conftest import require_sshd, start_or_skip
from .loopback import LoopbackFleet

ADDR = "127.5.1.1"
COMMAND = "printf 'out\\n'; printf 'err' >&2; cat; exit 3"
INPUT = bytes(range(256)) * 40  # 10 KiB, past one packet

SERVERS = {
    # name: (sshd_config lines, fallbacks expected)
    "curve25519-libssh": (["KexAlgorithms curve25519-sha256@libssh.org"], 0),
    "ecdh-nistp256": (["KexAlgorithms ecdh-sha2-nistp256"], 0),
    "aes256-gcm": (["Ciphers aes256-gcm@openssh.com"], 0),
    "aes128-ctr-only": (["Ciphers aes128-ctr", "MACs hmac-sha2-256"], 1),
    "dh-group14-only": (["KexAlgorithms diffie-hellman-group14-sha256"], 1),
}


@pytest.fixture(scope="module", params=list(SERVERS))
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoopbackFleet, int]]:
    require_sshd()
    options, fallbacks = SERVERS[request.param]
    fleet = LoopbackFleet(tmp_path_factory.mktemp("sshd-direct") / "fleet", sshd_options=options)
    fleet.add(ADDR, "shell", shell="/bin/sh")
    start_or_skip(fleet, ADDR)
    try:
        yield fleet, fallbacks
    finally:
        fleet.stop()


def test_each_algorithm_the_client_speaks_is_used_and_the_rest_falls_back(server: tuple[LoopbackFleet, int]) -> None:
    fleet, fallbacks = server
    h = SSHHost.from_spec(fleet.spec(ADDR), SSHContext(str(fleet.ssh_config)), timeout=60, single_run=True)
    got = h.run(COMMAND, input=INPUT)
    assert (got.rc, got.stdout, got.stderr) == (3, b"out\n" + INPUT, b"err")
    assert h.fallbacks == fallbacks
    assert h.connections == 1 + fallbacks
    assert h.key_exchanges == (1 if fallbacks == 0 else 0)  # paramiko's exchanges are not counted here


@pytest.fixture(scope="module")
def rsa_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoopbackFleet, Path]]:
    require_sshd()
    fleet = LoopbackFleet(tmp_path_factory.mktemp("sshd-rsa") / "fleet")
    fleet.add(ADDR, "shell", shell="/bin/sh")
    start_or_skip(fleet, ADDR)
    key = fleet.workdir / "client_rsa"
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "3072", "-N", "", "-f", str(key)], check=True,
                   stdin=subprocess.DEVNULL)
    ecdsa = fleet.workdir / "client_ecdsa"
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-b", "256", "-N", "", "-f", str(ecdsa)], check=True,
                   stdin=subprocess.DEVNULL)
    with (fleet.workdir / "authorized_keys").open("a") as f:
        f.write(Path(f"{key}.pub").read_text() + Path(f"{ecdsa}.pub").read_text())
    try:
        yield fleet, key
    finally:
        fleet.stop()


def _config(fleet: LoopbackFleet, tmp_path: Path, identity: Path) -> Path:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host *\n    User {fleet.user}\n    IdentityFile {identity}\n    IdentitiesOnly yes\n"
                   f"    UserKnownHostsFile {fleet.known_hosts}\n    GlobalKnownHostsFile none\n")
    return cfg


@pytest.mark.parametrize("name", ["client_rsa", "client_ecdsa"])
def test_rsa_and_ecdsa_key_files_log_in(rsa_fleet: tuple[LoopbackFleet, Path], tmp_path: Path, name: str) -> None:
    fleet, _ = rsa_fleet
    key = fleet.workdir / name
    h = SSHHost.from_spec(fleet.spec(ADDR), SSHContext(str(_config(fleet, tmp_path, key))), timeout=60,
                          single_run=True)
    assert h.run("echo in").stdout == b"in\n"
    assert h.fallbacks == 0


@pytest.mark.skipif(shutil.which("ssh-agent") is None, reason="needs ssh-agent")
def test_an_agent_only_rsa_key_logs_in_through_the_agent(rsa_fleet: tuple[LoopbackFleet, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fleet, key = rsa_fleet
    only_public = tmp_path / "agent_rsa"  # the IdentityFile names a key whose private half is not here
    shutil.copyfile(f"{key}.pub", f"{only_public}.pub")
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        assert b"SSH_AUTH_SOCK" in proc.stdout.readline()
        subprocess.run(["ssh-add", str(key)], env={"SSH_AUTH_SOCK": str(sock)}, check=True, capture_output=True,
                       timeout=60)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        h = SSHHost.from_spec(fleet.spec(ADDR), SSHContext(str(_config(fleet, tmp_path, only_public))), timeout=60,
                              single_run=True)
        assert h.run("echo agent").stdout == b"agent\n"
        assert h.fallbacks == 0
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()
