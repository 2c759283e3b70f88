"""bsdcrypt's own SSH client (bsdcrypt/ssh/direct.py) against servers that break the protocol.

The server here is a small SSH server in the test, on loopback, built from bsdcrypt's wire encodings
and packet layer with the key exchange computed independently (RFC 4253 7.2, RFC 8731) and the host
key's signature made by paramiko: it speaks well enough that the "good" case gives a clean run, and each
other case breaks one thing the way a broken or malicious sshd would. Each must end the host with one
clear row (protocol, closed, no-ssh), never a traceback or a hang, with the peer's bytes escaped.
Interoperability itself is tested against OpenSSH's sshd (test_direct_sshd.py, test_oneshot.py).
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives.asymmetric import x25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from bsdcrypt.hostapi import RunResult
from bsdcrypt.ssh import SSHContext, SSHError, SSHHost
from bsdcrypt.ssh.packets import Packets
from bsdcrypt.ssh.transport import session_key
from bsdcrypt.ssh.wireformat import Reader, mpint, name_list, string, text, u32

ADDR = "127.6.0.2"
CONTROL = {chr(c) for c in range(32)} | {"\x7f"}
SERVER_VERSION = b"SSH-2.0-OpenSSH_9.6"


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True,
                   stdin=subprocess.DEVNULL)
    return path


class Keys:
    def __init__(self, tmp: Path) -> None:
        self.host = paramiko.Ed25519Key(filename=str(_keygen(tmp / "host")))
        self.other = paramiko.Ed25519Key(filename=str(_keygen(tmp / "other")))
        self.client = _keygen(tmp / "client")


class Server:
    """One connection's server side. `case` names what it gets wrong (see CASES)."""

    def __init__(self, conn: socket.socket, keys: Keys, case: str) -> None:
        conn.settimeout(0.2)
        self.p = Packets(conn, time.monotonic() + 30)
        self.conn = conn
        self.keys = keys
        self.case = case
        self.session_id = b""
        self.client_version = b""
        self.got: list[int] = []  # the client's message numbers, in order

    def kexinit(self, ciphers: tuple[str, ...] = ("aes128-gcm@openssh.com",)) -> bytes:
        kex = ("curve25519-sha256", "kex-strict-s-v00@openssh.com") if self.case == "noise-before-a-strict-kexinit" \
            else ("curve25519-sha256",)
        return b"".join((
            bytes((20,)), os.urandom(16), name_list(kex), name_list(("ssh-ed25519",)),
            name_list(ciphers), name_list(ciphers), name_list(("hmac-sha2-256",)), name_list(("hmac-sha2-256",)),
            name_list(("none",)), name_list(("none",)), string(b""), string(b""), b"\0", bytes(4),
        ))

    def next(self) -> bytes:
        payload = self.p.read()
        self.got.append(payload[0])
        return payload

    def until(self, kind: int) -> bytes:
        while True:
            payload = self.next()
            if payload[0] == kind:
                return payload

    def exchange(self, ours: bytes, theirs: bytes, host_key: paramiko.PKey, bad_signature: bool = False) -> None:
        q_c = Reader(self.until(30), 1).string()
        eph = x25519.X25519PrivateKey.generate()
        q_s = eph.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        k = mpint(eph.exchange(x25519.X25519PublicKey.from_public_bytes(q_c)))
        k_s = host_key.asbytes()
        h = hashlib.sha256(b"".join((
            string(self.client_version), string(SERVER_VERSION), string(theirs), string(ours), string(k_s),
            string(q_c), string(q_s), k,
        ))).digest()
        self.session_id = self.session_id or h
        signed = bytes([h[0] ^ 1]) + h[1:] if bad_signature else h
        signature = host_key.sign_ssh_data(signed).asbytes()
        if self.case == "signature-of-another-type":
            r = Reader(signature)
            r.text()
            signature = text("ssh-rsa") + string(r.string())
        self.p.send(bytes((31,)) + string(k_s) + string(q_s) + string(signature))
        self.p.send(bytes((21,)))
        kh = k + h
        sid = self.session_id
        self.p.keys_out(session_key(hashlib.sha256, kh, "D", sid, 16), session_key(hashlib.sha256, kh, "B", sid, 12))
        self.until(21)
        self.p.keys_in(session_key(hashlib.sha256, kh, "C", sid, 16), session_key(hashlib.sha256, kh, "A", sid, 12))

    def serve(self) -> None:
        case = self.case
        if case == "lines-without-a-version":
            self.conn.sendall(b"x\r\n" * 1100)
            time.sleep(5)
            return
        if case == "bad-padding":
            self.p.send_raw(SERVER_VERSION + b"\r\n")
            body = bytes((200,)) + self.kexinit() + bytes(3)
            body += bytes(-(len(body) + 4) % 8)
            self.p.send_raw(len(body).to_bytes(4, "big") + body)
            self.p.flush()
            time.sleep(5)
            return
        ours = self.kexinit(("aes128-ctr",) if case == "no-common-cipher" else ("aes128-gcm@openssh.com",))
        self.p.send_raw(SERVER_VERSION + b"\r\n")
        if case == "noise-before-a-strict-kexinit":
            self.p.send(bytes((2,)) + string(b"inserted"))  # what a Terrapin attacker adds
        self.p.send(ours)
        self.client_version = self.p.read_version(time.monotonic() + 10).encode()
        theirs = self.until(20)
        if case == "no-common-cipher":  # and then hang up (paramiko, tried next, gets the same)
            return
        self.exchange(ours, theirs, self.keys.host, bad_signature=case == "bad-signature")
        if case == "disconnect-with-escapes":
            self.p.send(bytes((1,)) + u32(2) + text("bye\x1b[31m\r\n\x07owned") + text(""))
            self.p.flush()
            time.sleep(5)
            return
        if case == "bad-tag":
            self.p.send(bytes((2,)) + string(b"noise"))
            self.p.flush()
            self.conn.sendall(u32(32) + bytes(32 + 16))  # a plausible length, then bytes no key sealed
            time.sleep(5)
            return
        self.until(5)
        self.p.send(bytes((6,)) + text("ssh-userauth"))
        self.until(50)
        self.p.send(bytes((52,)))
        r = Reader(self.until(90), 1)
        r.text()
        client_channel = r.u32()
        if case == "truncated-confirmation":
            self.p.send(bytes((91,)) + u32(client_channel) + u32(7))
            self.p.flush()
            time.sleep(5)
            return
        self.p.send(bytes((91,)) + u32(client_channel) + u32(7) + u32(1 << 21) + u32(32768))
        self.until(98)
        if case == "exec-refused":
            self.p.send(bytes((100,)) + u32(client_channel))
            self.p.flush()
            time.sleep(5)
            return
        self.p.send(bytes((99,)) + u32(client_channel))
        if case == "new-host-key-in-a-rekey":
            again = self.kexinit()
            self.p.send(again)
            self.exchange(again, self.until(20), self.keys.other)
            time.sleep(5)
            return
        if case == "global-request-and-keepalive":
            self.p.send(bytes((80,)) + text("hostkeys-00@openssh.com") + b"\1")
            self.p.send(bytes((98,)) + u32(client_channel) + text("keepalive@openssh.com") + b"\1")
        self.until(96)  # the script is in; its EOF came
        if case == "more-than-a-message-may-carry":
            self.p.send(bytes((94,)) + u32(client_channel) + string(b"x" * 40000))
            self.p.flush()
            time.sleep(5)
            return
        self.p.send(bytes((94,)) + u32(client_channel) + string(b"hello\n"))
        self.p.send(bytes((95,)) + u32(client_channel) + u32(1) + string(b"warn\n"))
        self.p.send(bytes((98,)) + u32(client_channel) + text("exit-status") + b"\0" + u32(3))
        self.p.send(bytes((96,)) + u32(client_channel))
        if case == "exit-status-and-eof-then-silence":  # no CLOSE: the client ends the channel itself
            self.p.flush()
            self.until(97)
            return
        self.p.send(bytes((97,)) + u32(client_channel))
        self.until(97)


class Listener:
    """Serves each connection with `server` (a Server class) playing `case`; `rcvbuf` shrinks its socket
    buffer (a peer that reads slowly)."""

    def __init__(self, keys: Keys, case: str, server: type[Server] | None = None, rcvbuf: int | None = None) -> None:
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.server_class = server or Server
        self.sock.bind((ADDR, 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.servers: list[Server] = []
        self.errors: list[BaseException] = []
        self.keys, self.case = keys, case
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            server = self.server_class(conn, self.keys, self.case)
            self.servers.append(server)
            try:
                server.serve()
            except (OSError, EOFError, TimeoutError) as exc:  # the client hung up: what the cases expect
                self.errors.append(exc)
            finally:
                conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return Keys(tmp_path_factory.mktemp("direct-keys"))


def _run(keys: Keys, tmp_path: Path, case: str) -> tuple[SSHHost, Listener, Callable[[], RunResult]]:
    listener = Listener(keys, case)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[{ADDR}]:{listener.port} {keys.host.get_name()} {keys.host.get_base64()}\n")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host *\n    IdentityFile {keys.client}\n    IdentitiesOnly yes\n    UserKnownHostsFile {kh}\n"
                   "    GlobalKnownHostsFile none\n")
    host = SSHHost.from_spec(f"root@{ADDR}:{listener.port}", SSHContext(str(cfg)), timeout=20, single_run=True)
    return host, listener, lambda: host.run("echo ignored", input=b"the script\n")


def test_the_test_server_speaks_well_enough_for_a_clean_run(keys: Keys, tmp_path: Path) -> None:
    host, listener, run = _run(keys, tmp_path, "good")
    try:
        got = run()
    finally:
        host.close()
        listener.close()
    assert (got.rc, got.stdout, got.stderr) == (3, b"hello\n", b"warn\n")
    assert (host.fallbacks, host.key_exchanges, host.connections) == (0, 1, 1)


def test_the_exit_status_and_eof_end_the_run_without_waiting_for_the_servers_close(keys: Keys, tmp_path: Path) -> None:
    host, listener, run = _run(keys, tmp_path, "exit-status-and-eof-then-silence")
    t0 = time.monotonic()
    try:
        got = run()
    finally:
        host.close()
        listener.close()
    assert (got.rc, got.stdout, got.stderr) == (3, b"hello\n", b"warn\n")
    assert time.monotonic() - t0 < 15  # not the 20 s deadline


def test_a_global_request_and_a_keepalive_are_refused_and_the_run_goes_on(keys: Keys, tmp_path: Path) -> None:
    host, listener, run = _run(keys, tmp_path, "global-request-and-keepalive")
    try:
        got = run()
    finally:
        host.close()
        listener.close()
    assert got.stdout == b"hello\n"
    listener.thread.join(10)
    got_kinds = listener.servers[0].got
    assert 82 in got_kinds  # SSH_MSG_REQUEST_FAILURE for the global request that wanted a reply
    assert 100 in got_kinds  # SSH_MSG_CHANNEL_FAILURE for the keepalive


CASES = {
    # case: (kind, what the message says)
    "bad-signature": ("protocol", "host key signature does not verify"),
    "signature-of-another-type": ("protocol", "signed with 'ssh-rsa', not the ssh-ed25519 agreed"),
    "new-host-key-in-a-rekey": ("protocol", "changed its host key in a new key exchange"),
    "disconnect-with-escapes": ("closed", "ended the SSH session during authentication (reason 2: 'bye\\x1b[31m"),
    "bad-tag": ("protocol", "failed its AES-GCM authentication"),
    "noise-before-a-strict-kexinit": ("protocol", "1 message(s) before its KEXINIT in a strict key exchange"),
    "bad-padding": ("protocol", "bad padding length 200"),
    "truncated-confirmation": ("protocol", "a message ended early"),
    "exec-refused": ("protocol", "refused to run"),
    "more-than-a-message-may-carry": ("protocol", "40000 bytes of channel data in one message, more than the 32768"),
    "lines-without-a-version": ("no-ssh", "does not speak SSH: it sent 'x\\r\\nx\\r\\n"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_server_that_breaks_the_protocol_is_one_clear_row(keys: Keys, tmp_path: Path, case: str) -> None:
    kind, said = CASES[case]
    host, listener, run = _run(keys, tmp_path, case)
    t0 = time.monotonic()
    try:
        with pytest.raises(SSHError) as caught:
            run()
    finally:
        host.close()
        listener.close()
    err = str(caught.value)
    assert caught.value.kind == kind, err
    assert said in err, err
    assert not CONTROL & set(err), repr(err)
    assert len(err) < 300, err
    assert time.monotonic() - t0 < 15  # at once, not at the 20 s deadline
    assert host.fallbacks == 0


def test_a_server_without_the_direct_clients_algorithms_gets_paramiko(keys: Keys, tmp_path: Path) -> None:
    """No AES-GCM: the direct client stops before anything about the user is sent, and the host is tried
    again with paramiko (which this test server then refuses by closing: paramiko's own error)."""
    host, listener, run = _run(keys, tmp_path, "no-common-cipher")
    try:
        with pytest.raises(SSHError):
            run()
    finally:
        host.close()
        listener.close()
    assert host.fallbacks == 1
    assert host.connections == 2
    assert 50 not in listener.servers[0].got  # no login was attempted on the first connection
