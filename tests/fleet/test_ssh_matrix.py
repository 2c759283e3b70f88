"""The real-sshd matrix of issue 25, on both paths (`--ssh paramiko` and `--ssh openssh`): one OpenSSH sshd
on 127.9.0.1 with an ed25519 host key and a host certificate, an RSA host key, a user CA, and the client's
keys (ed25519, RSA, a key accepted only through its certificate). Each case runs `echo` through SSHHost
or OpenSSHHost and checks the row or the output; known_hosts is compared byte for byte where a case must
leave it alone."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bsdcrypt.errors import HostError
from bsdcrypt.hostapi import Host
from bsdcrypt.ssh import SSHContext, SSHHost
from bsdcrypt.ssh.openssh import OpenSSHContext, OpenSSHHost

from .conftest import require_sshd
from .loopback import SSHD, SSHD_LOGIN_OPTIONS, login_name

ADDR = "127.9.0.1"
JUMP = "127.9.0.2"  # the same sshd: ssh refuses a ProxyJump to the target's own address (a loop)
TIMEOUT = 30.0
PATHS = ["paramiko", "openssh"]


@dataclass
class Server:
    work: Path
    port: int
    user: str
    host_pub: str  # "ssh-ed25519 AAAA..." of the server
    other_pub: str  # a key the server does not have
    host_ca_pub: str

    def kh_line(self, pub: str, marker: str = "") -> str:
        return f"{marker + ' ' if marker else ''}[{ADDR}]:{self.port} {pub}\n"

    def config(self, tmp: Path, known_hosts: str, extra: str = "", identity: str = "client_ed25519") -> Path:
        kh = tmp / "known_hosts"
        kh.write_text(known_hosts)
        cfg = tmp / "ssh_config"
        cfg.write_text(
            f"{extra}"
            "Host *\n"
            f"    User {self.user}\n"
            f"    IdentityFile {self.work / identity}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {kh}\n"
            "    GlobalKnownHostsFile none\n"
            "    HashKnownHosts no\n"
        )
        return cfg


def _keygen(path: Path, kind: str = "ed25519") -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True, timeout=60)
    return " ".join(path.with_suffix(path.suffix + ".pub").read_text().split()[:2])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((ADDR, 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require_sshd()
    w = tmp_path_factory.mktemp("matrix")
    host_pub = _keygen(w / "host_ed25519")
    _keygen(w / "host_rsa", "rsa")
    host_ca = _keygen(w / "host_ca")
    subprocess.run(["ssh-keygen", "-q", "-s", str(w / "host_ca"), "-I", "matrix-host", "-h", "-n", ADDR,
                    str(w / "host_ed25519.pub")], check=True, timeout=60)
    user_ca = _keygen(w / "user_ca")
    user = login_name()
    keys = [_keygen(w / "client_ed25519"), _keygen(w / "client_rsa", "rsa"), _keygen(w / "refusing"),
            _keygen(w / "confirmed")]
    _keygen(w / "cert_only")
    subprocess.run(["ssh-keygen", "-q", "-s", str(w / "user_ca"), "-I", "matrix-user", "-n", user,
                    str(w / "cert_only.pub")], check=True, timeout=60)
    (w / "authorized_keys").write_text("\n".join(keys) + "\n")
    (w / "user_ca.pub").write_text(user_ca + "\n")
    other = _keygen(w / "other")
    port = _free_port()
    cfg = w / "sshd_config"
    cfg.write_text("\n".join([
        f"Port {port}", f"ListenAddress {ADDR}", f"ListenAddress {JUMP}", f"HostKey {w}/host_ed25519", f"HostKey {w}/host_rsa",
        f"HostCertificate {w}/host_ed25519-cert.pub", f"PidFile {w}/sshd.pid",
        f"AuthorizedKeysFile {w}/authorized_keys", f"TrustedUserCAKeys {w}/user_ca.pub",
        *SSHD_LOGIN_OPTIONS, "AllowTcpForwarding yes", "LogLevel VERBOSE", f"SetEnv HOME={w}",
    ]) + "\n")
    log = w / "sshd.log"
    proc = subprocess.Popen([SSHD, "-D", "-f", str(cfg), "-E", str(log)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.monotonic() + 60
        while "Server listening" not in (log.read_text() if log.exists() else ""):
            if time.monotonic() > end or proc.poll() is not None:
                pytest.skip(f"the matrix sshd did not start: {log.read_text()[-300:]}")
            time.sleep(0.1)
        yield Server(w, port, user, host_pub, other, host_ca)
    finally:
        proc.kill()
        proc.wait(30)


def _host(path: str, cfg: Path, accept_new: bool = False, spec: str | None = None) -> Host:
    spec = spec or f"{ADDR}"
    if path == "openssh":
        return OpenSSHHost.from_spec(spec, OpenSSHContext(str(cfg), accept_new=accept_new), timeout=TIMEOUT)
    return SSHHost.from_spec(spec, SSHContext(str(cfg), accept_new=accept_new), timeout=TIMEOUT)


def _echo(host: Host) -> bytes:
    try:
        return host.run("echo matrix-ok").stdout
    finally:
        host.close()


def _fails(host: Host) -> HostError:
    with pytest.raises(HostError) as caught:
        _echo(host)
    return caught.value


def _port(server: Server) -> str:
    return f"Host {ADDR}\n    Port {server.port}\n"


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
def test_plain_ed25519(server: Server, tmp_path: Path, path: str) -> None:
    cfg = server.config(tmp_path, server.kh_line(server.host_pub), _port(server))
    assert _echo(_host(path, cfg)) == b"matrix-ok\n"


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("alg", ["rsa-sha2-256", "rsa-sha2-512"])
def test_rsa_with_each_sha2_signature(server: Server, tmp_path: Path, path: str, alg: str) -> None:
    cfg = server.config(tmp_path, server.kh_line(server.host_pub),
                        _port(server) + f"    PubkeyAcceptedAlgorithms {alg}\n", identity="client_rsa")
    assert _echo(_host(path, cfg)) == b"matrix-ok\n"


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
def test_a_user_certificate_beside_the_key(server: Server, tmp_path: Path, path: str) -> None:
    """The key is in no authorized_keys: only its certificate (cert_only-cert.pub, signed by the CA the
    server trusts) lets it in, on both paths."""
    cfg = server.config(tmp_path, server.kh_line(server.host_pub), _port(server), identity="cert_only")
    assert _echo(_host(path, cfg)) == b"matrix-ok\n"


@pytest.mark.parametrize("path", PATHS)
def test_a_host_certificate_against_cert_authority(server: Server, tmp_path: Path, path: str) -> None:
    """openssh verifies the host certificate; paramiko cannot, says so and names --ssh openssh. known_hosts
    is byte-identical afterwards, --accept-new or not."""
    kh = server.kh_line(server.host_ca_pub, "@cert-authority")
    cfg = server.config(tmp_path, kh, _port(server))
    before = (tmp_path / "known_hosts").read_bytes()
    host = _host(path, cfg, accept_new=True)
    if path == "openssh":
        assert _echo(host) == b"matrix-ok\n"
    else:
        err = _fails(host)
        assert getattr(err, "kind", "") == "unsupported" and "--ssh openssh" in str(err), str(err)
    assert (tmp_path / "known_hosts").read_bytes() == before


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", ["changed", "revoked"])
def test_a_changed_or_revoked_key_is_refused_and_known_hosts_untouched(
    server: Server, tmp_path: Path, path: str, case: str
) -> None:
    if case == "changed":
        kh = server.kh_line(server.other_pub)
        kind = "hostkey-changed"
    else:
        kh = server.kh_line(server.host_pub, "@revoked") + server.kh_line(server.other_pub)
        kind = "hostkey-revoked"
    # the server's ed25519 key first: the changed/revoked one is the one it presents
    cfg = server.config(tmp_path, kh, _port(server) + "    HostKeyAlgorithms ssh-ed25519\n")
    before = (tmp_path / "known_hosts").read_bytes()
    err = _fails(_host(path, cfg, accept_new=True))
    assert getattr(err, "kind", "") == kind, str(err)
    assert (tmp_path / "known_hosts").read_bytes() == before


@pytest.mark.parametrize("path", PATHS)
def test_hashed_known_hosts(server: Server, tmp_path: Path, path: str) -> None:
    cfg = server.config(tmp_path, server.kh_line(server.host_pub), _port(server))
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(tmp_path / "known_hosts")], check=True, timeout=60,
                   capture_output=True)
    assert ADDR not in (tmp_path / "known_hosts").read_text()
    assert _echo(_host(path, cfg)) == b"matrix-ok\n"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("how", ["ProxyJump", "ProxyCommand"])
def test_through_a_proxy(server: Server, tmp_path: Path, path: str, how: str) -> None:
    """`target` is reached through the server itself (a jump host of its own): ProxyJump, or a
    ProxyCommand relaying with busybox nc."""
    if how == "ProxyCommand" and shutil.which("busybox") is None:
        pytest.skip("needs busybox (nc)")
    via = (f"    ProxyJump {server.user}@{JUMP}:{server.port}\n" if how == "ProxyJump"
           else "    ProxyCommand busybox nc %h %p\n")
    extra = f"Host target\n    HostName {ADDR}\n    Port {server.port}\n{via}" + _port(server)
    kh = server.kh_line(server.host_pub) + f"[{JUMP}]:{server.port} {server.host_pub}\n"
    cfg = server.config(tmp_path, kh, extra)
    assert _echo(_host(path, cfg, spec="target")) == b"matrix-ok\n"


@pytest.fixture
def agent(server: Server, tmp_path: Path) -> Iterator[Path]:
    """An agent holding first a key that refuses to sign (added with confirmation, and no askpass to
    confirm it), then one that signs. Both keys are in authorized_keys."""
    if shutil.which("ssh-agent") is None:
        pytest.skip("needs ssh-agent")
    sock = tmp_path / "agent.sock"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SSH_ASKPASS": "/bin/false", "SSH_AUTH_SOCK": str(sock)}
    proc = subprocess.Popen(["ssh-agent", "-d", "-a", str(sock)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        assert b"SSH_AUTH_SOCK" in proc.stdout.readline()
        subprocess.run(["ssh-add", "-c", str(server.work / "refusing")], env=env, check=True, capture_output=True,
                       timeout=60)
        subprocess.run(["ssh-add", str(server.work / "confirmed")], env=env, check=True, capture_output=True,
                       timeout=60)
        yield sock
    finally:
        proc.kill()
        proc.wait(30)
        if proc.stdout:
            proc.stdout.close()


@pytest.mark.parametrize("path", PATHS)
def test_an_agent_key_that_refuses_to_sign_then_one_that_works(
    server: Server, tmp_path: Path, agent: Path, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent))
    monkeypatch.setenv("SSH_ASKPASS", "/bin/false")
    monkeypatch.delenv("DISPLAY", raising=False)
    cfg = server.config(tmp_path, server.kh_line(server.host_pub), _port(server), identity="no-such-key")
    cfg.write_text(cfg.read_text().replace("    IdentitiesOnly yes\n", ""))
    host = _host(path, cfg)
    assert _echo(host) == b"matrix-ok\n"
    if isinstance(host, SSHHost):  # paramiko signs before asking: the refusal ended a connection, a new one went on
        assert host.connections == 2
