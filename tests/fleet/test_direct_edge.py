"""More servers that break the protocol, for bsdcrypt's own SSH client (after an audit of direct.py):
a peer that stops reading for seconds, server text with terminal escapes in error rows, a DISCONNECT
before the KEXINIT, lines before the version spread over seconds, data after EOF, a window never
opened, a maximum packet size of 0; and the host-key checks on a key too small or a point in the
wrong form. The server is test_direct_hostile.py's, with more cases."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bsdcrypt.ssh import SSHContext, SSHError, SSHHost
from bsdcrypt.ssh.kex import Exchange, KexError, verify_host_key
from bsdcrypt.ssh.wireformat import Reader, mpint, name_list, string, text, u32

from .test_direct_hostile import ADDR, CONTROL, SERVER_VERSION, Keys, Listener, Server


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return Keys(tmp_path_factory.mktemp("direct-edge-keys"))


class EdgeServer(Server):
    def kexinit_with(self, host_keys: tuple[str, ...], ciphers: tuple[str, ...]) -> bytes:
        return b"".join((
            bytes((20,)), os.urandom(16), name_list(("curve25519-sha256",)), name_list(host_keys),
            name_list(ciphers), name_list(ciphers), name_list(("hmac-sha2-256",)), name_list(("hmac-sha2-256",)),
            name_list(("none",)), name_list(("none",)), string(b""), string(b""), b"\0", bytes(4),
        ))

    def handshake(self) -> None:
        ours = self.kexinit()
        self.p.send_raw(SERVER_VERSION + b"\r\n")
        self.p.send(ours)
        self.client_version = self.p.read_version(time.monotonic() + 10).encode()
        theirs = self.until(20)
        self.exchange(ours, theirs, self.keys.host)
        self.until(5)
        self.p.send(bytes((6,)) + text("ssh-userauth"))
        self.until(50)

    def session(self, window: int = 1 << 21) -> int:
        self.p.send(bytes((52,)))
        r = Reader(self.until(90), 1)
        r.text()
        channel = r.u32()
        self.p.send(bytes((91,)) + u32(channel) + u32(7) + u32(window) + u32(32768))
        self.until(98)
        self.p.send(bytes((99,)) + u32(channel))
        return channel

    def finish(self, channel: int, out: bytes = b"hello\n") -> None:
        self.p.send(bytes((94,)) + u32(channel) + string(out))
        self.p.send(bytes((98,)) + u32(channel) + text("exit-status") + b"\0" + u32(0))
        self.p.send(bytes((96,)) + u32(channel))
        self.p.send(bytes((97,)) + u32(channel))
        self.until(97)

    def serve(self) -> None:
        case = self.case
        if case == "disconnect-before-kexinit":  # e.g. a server over its connection limit
            self.p.send_raw(SERVER_VERSION + b"\r\n")
            self.p.send(bytes((1,)) + u32(2) + text("Too many connections from your address") + text(""))
            self.p.flush()
            time.sleep(5)
            return
        if case == "pre-banner-lines-one-second-apart":
            for i in range(3):
                self.conn.sendall(b"notice %d\r\n" % i)
                time.sleep(1.2)
            self.case = "good"
            super().serve()
            return
        self.handshake()
        if case in ("auth-methods-with-escapes", "partial-success-with-escapes"):
            methods = b"password\x1b[2J\x1b]0;owned\x07," + b"keyboard-interactive," * 2000
            partial = b"\1" if case == "partial-success-with-escapes" else b"\0"
            self.p.send(bytes((51,)) + string(methods.rstrip(b",")) + partial)
            self.p.flush()
            time.sleep(5)
            return
        if case == "rekey-with-escapes":
            self.session()
            again = self.kexinit_with(("ssh-ed25519\x1b[31m\r\nowned",), ("aes128-gcm@openssh.com",))
            self.p.send(again)
            self.p.flush()
            time.sleep(5)
            return
        if case == "data-after-eof":
            channel = self.session()
            self.until(96)
            self.p.send(bytes((94,)) + u32(channel) + string(b"hello\n"))
            self.p.send(bytes((96,)) + u32(channel))
            self.p.send(bytes((94,)) + u32(channel) + string(b"injected after EOF\n"))
            self.p.send(bytes((95,)) + u32(channel) + u32(1) + string(b"stderr after EOF\n"))
            self.p.send(bytes((98,)) + u32(channel) + text("exit-status") + b"\0" + u32(0))
            self.p.send(bytes((97,)) + u32(channel))
            self.until(97)
            return
        if case == "slow-reader":  # reads nothing for 3 s (a congested link, a busy host), then all of it
            channel = self.session(window=0xFFFFFFFF)
            self.p.flush()
            time.sleep(3)
            self.until(96)
            self.finish(channel)
            return
        if case == "window-never-adjusted":  # 64 KiB of window, never more
            channel = self.session(window=65536)
            time.sleep(30)
            return
        if case == "max-packet-zero":
            self.p.send(bytes((52,)))
            r = Reader(self.until(90), 1)
            r.text()
            channel = r.u32()
            self.p.send(bytes((91,)) + u32(channel) + u32(7) + u32(0xFFFFFFFF) + u32(0))
            self.until(98)
            self.p.send(bytes((99,)) + u32(channel))
            self.until(96)
            self.finish(channel)
            return
        raise AssertionError(case)


def _listener(keys: Keys, case: str, rcvbuf: int | None = None) -> Listener:
    return Listener(keys, case, EdgeServer, rcvbuf)


def _host(keys: Keys, tmp_path: Path, listener: Listener) -> SSHHost:
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[{ADDR}]:{listener.port} {keys.host.get_name()} {keys.host.get_base64()}\n")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host *\n    IdentityFile {keys.client}\n    IdentitiesOnly yes\n    UserKnownHostsFile {kh}\n"
                   "    GlobalKnownHostsFile none\n")
    return SSHHost.from_spec(f"root@{ADDR}:{listener.port}", SSHContext(str(cfg)), timeout=20, single_run=True)


def _fails(keys: Keys, tmp_path: Path, case: str) -> SSHError:
    listener = _listener(keys, case)
    host = _host(keys, tmp_path, listener)
    try:
        with pytest.raises(SSHError) as caught:
            host.run("echo ignored", input=b"the script\n")
    finally:
        host.close()
        listener.close()
    return caught.value


# Server text (40 KB of auth methods, a name-list with escapes) in an error row: escaped and short.
@pytest.mark.parametrize("case", ["auth-methods-with-escapes", "partial-success-with-escapes", "rekey-with-escapes"])
def test_server_text_in_errors_is_escaped_and_short(keys: Keys, tmp_path: Path, case: str) -> None:
    err = str(_fails(keys, tmp_path, case))
    assert not CONTROL & set(err), repr(err[:200])
    assert len(err) < 300, len(err)


# The socket's 1 s timeout is a poll interval: a peer that reads nothing for 3 s is not a failure.
def test_a_peer_that_pauses_reading_does_not_fail_the_host_before_its_deadline(keys: Keys, tmp_path: Path) -> None:
    listener = _listener(keys, "slow-reader", rcvbuf=4096)
    host = _host(keys, tmp_path, listener)
    t0 = time.monotonic()
    try:
        got = host.run("cat >/dev/null", input=b"a" * (8 << 20))
    except SSHError as exc:
        pytest.fail(f"after {time.monotonic() - t0:.1f}s of a 20 s deadline: [{exc.kind}] {exc}")
    finally:
        host.close()
        listener.close()
    assert got.stdout == b"hello\n"


# A DISCONNECT before the KEXINIT (sshd over MaxStartups) says why.
def test_a_disconnect_before_kexinit_says_why(keys: Keys, tmp_path: Path) -> None:
    exc = _fails(keys, tmp_path, "disconnect-before-kexinit")
    assert "Too many connections" in str(exc), f"[{exc.kind}] {exc}"


# Data and stderr after the server's EOF are not output (ssh drops them).
def test_data_after_eof_is_not_output(keys: Keys, tmp_path: Path) -> None:
    listener = _listener(keys, "data-after-eof")
    host = _host(keys, tmp_path, listener)
    try:
        got = host.run("echo ignored", input=b"the script\n")
    except SSHError:
        return  # refusing the run is fine too (OpenSSH disconnects on stderr after EOF)
    finally:
        host.close()
        listener.close()
    assert got.stdout == b"hello\n" and got.stderr == b"", got


# Each line before the version gets its own 2 s (paramiko's rule), not 2 s for all of them.
def test_pre_banner_lines_each_get_their_own_wait(keys: Keys, tmp_path: Path) -> None:
    listener = _listener(keys, "pre-banner-lines-one-second-apart")
    host = _host(keys, tmp_path, listener)
    try:
        got = host.run("echo ignored", input=b"the script\n")
    except SSHError as exc:
        pytest.fail(f"[{exc.kind}] {exc}")
    finally:
        host.close()
        listener.close()
    assert got.stdout == b"hello\n"


# A server that never opens its window ends at the deadline, naming the phase; a maximum packet size
# of 0 costs one packet per byte of the script (bounded by the script's size).
def test_a_window_never_adjusted_ends_at_the_deadline(keys: Keys, tmp_path: Path) -> None:
    listener = _listener(keys, "window-never-adjusted")
    host = _host(keys, tmp_path, listener)
    host.timeout = 4
    t0 = time.monotonic()
    try:
        with pytest.raises(SSHError) as caught:
            host.run("cat >/dev/null", input=b"a" * 200000, timeout=4)
    finally:
        host.close()
        listener.close()
    took = time.monotonic() - t0
    assert caught.value.kind == "timeout" and "sending the script" in str(caught.value), str(caught.value)
    assert took >= 3.9  # not before the deadline (a loaded machine may take longer after it)


def test_max_packet_zero(keys: Keys, tmp_path: Path) -> None:
    listener = _listener(keys, "max-packet-zero")
    host = _host(keys, tmp_path, listener)
    try:
        got = host.run("cat >/dev/null", input=b"a" * 50000)
    finally:
        host.close()
        listener.close()
    assert got.stdout == b"hello\n"


def test_an_rsa_host_key_under_1024_bits_is_refused() -> None:
    """ssh's RequiredRSASize (1024): checked before the signature, whatever it says."""
    blob = text("ssh-rsa") + mpint((65537).to_bytes(3, "big")) + mpint(((1 << 511) | 1).to_bytes(64, "big"))
    with pytest.raises(KexError, match="RSA host key has 512 bits; ssh requires 1024"):
        verify_host_key("rsa-sha2-512", blob, text("rsa-sha2-512") + string(bytes(64)), bytes(32))


def test_a_compressed_p256_point_is_refused() -> None:
    with pytest.raises(KexError, match="not an uncompressed point"):
        Exchange("ecdh-sha2-nistp256").shared(b"\x02" + bytes(32))
