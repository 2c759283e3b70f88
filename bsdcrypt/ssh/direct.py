"""fleet-audit's one exec a host over a small SSH client of its own: no paramiko Transport, no thread.

paramiko spends most of a short connection's client CPU in its own Python around each message (a
Message object per field, its dispatch tables, locks, the packetizer's reads and checks): ~4.4 ms of
~6.2 a host in fleet-audit (docs/performance.md). This client does only what one exec needs, with
the cryptography in C (`cryptography`): the version lines, one ECDH key exchange (and any the server
starts later), the host key checked as SSHHost always does, public-key login with paramiko's key
objects (key files and ssh-agent alike), one session channel: exec `/bin/sh -s`, the script as the
server's window allows, EOF, the output read until the channel closes.

A server that shares none of its algorithms (packets.py, kex.py: Curve25519 or P-256 ECDH, AES-GCM)
raises `Unsupported` before anything about the user is sent; SSHHost then uses paramiko's loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import paramiko

import bsdcrypt.ssh.kex as kex
from bsdcrypt.ssh.config import Target
from bsdcrypt.ssh.errors import SSHError, shown_bytes, shown_names
from bsdcrypt.ssh.kex import Exchange, KexError, Unsupported
from bsdcrypt.ssh.packets import PacketError, Packets
from bsdcrypt.ssh.wireformat import Reader, string, text, u32

__all__ = ["Unsupported", "exec_once", "CLIENT_VERSION"]

CLIENT_VERSION = "SSH-2.0-bsdcrypt"

MSG_DISCONNECT = 1
MSG_IGNORE = 2
MSG_UNIMPLEMENTED = 3
MSG_DEBUG = 4
MSG_SERVICE_REQUEST = 5
MSG_SERVICE_ACCEPT = 6
MSG_EXT_INFO = 7
MSG_USERAUTH_REQUEST = 50
MSG_USERAUTH_FAILURE = 51
MSG_USERAUTH_SUCCESS = 52
MSG_USERAUTH_BANNER = 53
MSG_GLOBAL_REQUEST = 80
MSG_REQUEST_FAILURE = 82
MSG_CHANNEL_OPEN = 90
MSG_CHANNEL_OPEN_CONFIRMATION = 91
MSG_CHANNEL_OPEN_FAILURE = 92
MSG_CHANNEL_WINDOW_ADJUST = 93
MSG_CHANNEL_DATA = 94
MSG_CHANNEL_EXTENDED_DATA = 95
MSG_CHANNEL_EOF = 96
MSG_CHANNEL_CLOSE = 97
MSG_CHANNEL_REQUEST = 98
MSG_CHANNEL_SUCCESS = 99
MSG_CHANNEL_FAILURE = 100
_KEX_MESSAGES = frozenset(range(20, 50))
_SKIPPED = frozenset((MSG_IGNORE, MSG_DEBUG, MSG_UNIMPLEMENTED))
MAX_DATA = 32768  # the largest channel data this client accepts in one message (paramiko's too)
CHANNEL = 0  # this client's one channel number


class Host(Protocol):
    """What the client needs of its SSHHost: the target, the phase it names in errors, its limits and
    checks (known_hosts, the keys to offer, the deadline) and the errors it words."""

    target: Target
    phase: str
    execs: int
    max_output: int

    def check_host_key(self, key_type: str, blob: bytes) -> None: ...
    def key_candidates(self) -> tuple[list[tuple[str, paramiko.PKey]], list[str], paramiko.Agent | None]: ...
    def check_deadline(self) -> None: ...
    def next_phase(self, phase: str) -> None: ...
    def auth_refused(self, tried: list[str], notes: list[str]) -> SSHError: ...
    def more_auth(self, rest: list[str]) -> SSHError: ...
    def too_much(self) -> SSHError: ...


@dataclass
class Session:
    """What one exec has gathered; `rc` -1 until an exit status arrives (none: killed or cut off)."""

    out: list[bytes] = field(default_factory=list)
    err: list[bytes] = field(default_factory=list)
    size: int = 0
    rc: int = -1
    key_exchanges: int = 0


class Client:
    """One connection's protocol state, driven by `exec_once`."""

    def __init__(self, host: Host, packets: Packets, host_keys: tuple[str, ...]) -> None:
        self.host = host
        self.p = packets
        self.host_keys = host_keys
        self.version = b""
        self.server_version = b""
        self.session_id = b""
        self.host_key = b""
        self.sig_algs: list[str] | None = None  # server-sig-algs from EXT_INFO (None: never sent)
        self.session = Session()
        self.choice: kex.Choice | None = None
        self._kexinit = b""

    # -- messages

    def message(self) -> tuple[int, bytes]:
        """The next message that is not noise; a server's new key exchange is carried through here."""
        while True:
            payload = self.p.read()
            if not payload:
                raise PacketError("an empty packet")
            kind = payload[0]
            if kind in _SKIPPED:
                continue
            if kind == kex.MSG_KEXINIT:
                self._rekey(payload)
                continue
            if kind == MSG_DISCONNECT:
                raise self._disconnected(payload)
            if kind == MSG_GLOBAL_REQUEST:  # e.g. hostkeys-00@openssh.com; anything asking for a reply is refused
                r = Reader(payload, 1)
                r.string()
                if r.boolean():
                    self.p.send(bytes((MSG_REQUEST_FAILURE,)))
                continue
            if kind == MSG_EXT_INFO:
                self._ext_info(payload)
                continue
            return kind, payload

    def _disconnected(self, payload: bytes) -> SSHError:
        r = Reader(payload, 1)
        code = r.u32()
        why = r.string()
        t = self.host.target
        said = f": {shown_bytes(why, 120)}" if why else ""
        return SSHError("closed", f"{t.hostname} port {t.port} ended the SSH session during {self.host.phase} "
                        f"(reason {code}{said})")

    def _ext_info(self, payload: bytes) -> None:
        r = Reader(payload, 1)
        for _ in range(min(r.u32(), 64)):
            name = r.text()
            value = r.string()
            if name == "server-sig-algs":
                self.sig_algs = value.decode("ascii", "replace").split(",")

    def _unexpected(self, kind: int, when: str) -> PacketError:
        return PacketError(f"the server sent message {kind} {when}")

    # -- key exchange

    def start(self) -> None:
        """Our version line and first KEXINIT, at once (RFC 4253 allows it; ssh does the same)."""
        self.version = CLIENT_VERSION.encode("ascii")
        self.p.send_raw(self.version + b"\r\n")
        self._kexinit = kex.kexinit(self.host_keys, first=True)
        self.p.send(self._kexinit)

    def first_kex(self, server_version: str) -> None:
        self.server_version = server_version.encode("ascii")
        payload = self.p.read()  # OpenSSH's first packet is its KEXINIT
        skipped = 0
        while payload and payload[0] in _SKIPPED:
            skipped += 1
            payload = self.p.read()
        if payload and payload[0] == MSG_DISCONNECT:  # e.g. over its MaxStartups: say what it said
            raise self._disconnected(payload)
        if not payload or payload[0] != kex.MSG_KEXINIT:
            raise self._unexpected(payload[0] if payload else -1, "before its KEXINIT")
        self.choice = kex.choose(payload, self.host_keys, first=True)
        strict = self.choice.strict
        if strict and skipped:  # strict key exchange: KEXINIT must be the first packet
            raise KexError(f"the server sent {skipped} message(s) before its KEXINIT in a strict key exchange")
        self._exchange(payload, noise_refused=strict)

    def _rekey(self, server_kexinit: bytes) -> None:
        """The server starts a new key exchange: the same host key, new session keys, the same session id."""
        if self.choice is None:
            raise self._unexpected(kex.MSG_KEXINIT, "during the key exchange")
        self._kexinit = kex.kexinit((self.choice.host_key,), first=False)
        self.p.send(self._kexinit)
        try:
            choice = kex.choose(server_kexinit, (self.choice.host_key,), first=False)
        except Unsupported as exc:  # this late a fallback is no longer possible
            raise PacketError(f"the server's new key exchange: {exc}") from None
        self.choice = choice
        self._exchange(server_kexinit, noise_refused=False)

    def _exchange(self, server_kexinit: bytes, noise_refused: bool) -> None:
        """One ECDH exchange. `noise_refused`: the first exchange of a strict connection, where nothing
        but the exchange's own messages may come (strict key exchange also restarts the sequence
        numbers at NEWKEYS, which this client does not keep: see packets.py)."""
        assert self.choice is not None
        ex = Exchange(self.choice.kex)
        self.p.send(ex.init_message())
        payload = self._kex_reply(noise_refused)
        if payload[0] != kex.MSG_KEX_ECDH_REPLY:
            raise self._unexpected(payload[0], "instead of its ECDH reply")
        r = Reader(payload, 1)
        host_key, server_public, signature = r.string(), r.string(), r.string()
        k = ex.shared(server_public)
        h = ex.hash(self.version, self.server_version, self._kexinit, server_kexinit, host_key, server_public, k)
        key_type = kex.verify_host_key(self.choice.host_key, host_key, signature, h)
        if self.session_id and host_key != self.host_key:
            raise KexError("the server changed its host key in a new key exchange")
        if not self.session_id:  # the first exchange: known_hosts decides before anything else is sent
            self.host.phase = "host key check"
            self.host.check_host_key(key_type, host_key)
            self.host.phase = "key exchange"
            self.session_id = h
            self.host_key = host_key
        iv_out, key_out, iv_in, key_in = kex.session_keys(k, h, self.session_id, self.choice)
        self.p.send(bytes((kex.MSG_NEWKEYS,)))
        self.p.keys_out(key_out, iv_out)
        payload = self._kex_reply(noise_refused)
        if payload[0] != kex.MSG_NEWKEYS:
            raise self._unexpected(payload[0], "instead of NEWKEYS")
        self.p.keys_in(key_in, iv_in)
        self.session.key_exchanges += 1

    def _kex_reply(self, noise_refused: bool) -> bytes:
        """The server's next key exchange message: noise is skipped unless the exchange is strict."""
        while True:
            payload = self.p.read()
            if not payload:
                raise PacketError("an empty packet")
            if payload[0] in _KEX_MESSAGES and payload[0] != kex.MSG_KEXINIT:
                return payload
            if payload[0] in _SKIPPED and not noise_refused:
                continue
            if payload[0] == MSG_DISCONNECT:
                raise self._disconnected(payload)
            raise self._unexpected(payload[0], "during the key exchange")

    # -- login

    def login(self) -> None:
        """Public-key login. With OpenSSH the first key goes out with the service request, not after its
        answer (sshd's auth2.c handles the messages in order: one round trip less); an RSA key waits
        for EXT_INFO, which names the signatures the server takes."""
        host = self.host
        host.phase = "authentication"
        self.p.send(bytes((MSG_SERVICE_REQUEST,)) + text("ssh-userauth"))
        keys, notes, agent = host.key_candidates()
        tried: list[str] = []
        try:
            early = bool(keys) and self.server_version.startswith(b"SSH-2.0-OpenSSH_") \
                and keys[0][1].get_name() != "ssh-rsa"
            if early:
                tried.append(keys[0][0])
                self._offer(keys[0][1])
            kind, payload = self.message()
            if kind != MSG_SERVICE_ACCEPT:
                raise self._unexpected(kind, "instead of accepting ssh-userauth")
            for i, (label, key) in enumerate(keys):
                if not (early and i == 0):
                    tried.append(label)
                    host.check_deadline()
                    self._offer(key)
                if self._accepted():
                    return
        finally:
            if agent is not None:
                agent.close()
        raise host.auth_refused(tried, notes)

    def _signature_algorithm(self, key: paramiko.PKey) -> str:
        name = str(key.get_name())
        if name != "ssh-rsa":
            return name
        if self.sig_algs is None:  # a server without EXT_INFO (OpenSSH before 7.2) knows only SHA-1 RSA
            return "ssh-rsa"
        for alg in ("rsa-sha2-512", "rsa-sha2-256"):
            if alg in self.sig_algs:
                return alg
        return "ssh-rsa"

    def _offer(self, key: paramiko.PKey) -> None:
        """One public key with its signature (as paramiko does: no query first)."""
        host = self.host
        alg = self._signature_algorithm(key)
        request = b"".join((
            bytes((MSG_USERAUTH_REQUEST,)), text(host.target.user), text("ssh-connection"), text("publickey"),
            b"\1", text(alg), string(key.asbytes()),
        ))
        signature: Any = key.sign_ssh_data(string(self.session_id) + request, alg)
        if not isinstance(signature, bytes):  # a key file's signature is a Message, the agent's its bytes
            signature = signature.asbytes()
        self.p.send(request + string(signature))

    def _accepted(self) -> bool:
        """The answer to the last key offered: True once logged in, False for the next key."""
        host = self.host
        while True:
            kind, payload = self.message()
            if kind == MSG_USERAUTH_BANNER:
                continue
            if kind == MSG_USERAUTH_SUCCESS:
                return True
            if kind != MSG_USERAUTH_FAILURE:
                raise self._unexpected(kind, "instead of an answer to a login")
            r = Reader(payload, 1)
            methods = r.names()
            if r.boolean():
                raise host.more_auth(methods)
            if "publickey" not in methods:
                t = host.target
                allowed = shown_names(methods) or "none"
                raise SSHError("auth", f"{t.user}@{t.hostname} port {t.port} does not accept public keys "
                               f"(allows: {allowed})")
            return False

    # -- the session channel

    def run(self, command: str, stdin: bytes, window: int) -> Session:
        host = self.host
        p = self.p
        s = self.session
        host.next_phase("opening the session")
        p.send(bytes((MSG_CHANNEL_OPEN,)) + text("session") + u32(CHANNEL) + u32(window) + u32(MAX_DATA))
        kind, payload = self.message()
        if kind == MSG_CHANNEL_OPEN_FAILURE:
            r = Reader(payload, 5)
            code, why = r.u32(), r.text()
            raise PacketError(f"the server refused the session channel ({code}: {why[:120]!r})")
        if kind != MSG_CHANNEL_OPEN_CONFIRMATION:
            raise self._unexpected(kind, "instead of opening the session")
        r = Reader(payload, 1)
        if r.u32() != CHANNEL:
            raise PacketError("the server confirmed a channel that was never opened")
        remote, remote_window, remote_max = r.u32(), r.u32(), r.u32()
        host.next_phase("exec")
        p.send(bytes((MSG_CHANNEL_REQUEST,)) + u32(remote) + text("exec") + b"\1" + text(command))
        host.execs += 1
        host.next_phase("sending the script")
        chunk = max(1, min(remote_max, MAX_DATA))
        sent = 0
        sending = True
        window_left = window  # what the server may still send us
        unacked = 0  # read since our last window adjustment
        eof = closed = False
        limit = host.max_output
        while True:
            if sending:
                while sent < len(stdin) and remote_window > 0:
                    n = min(chunk, remote_window, len(stdin) - sent)
                    p.send(bytes((MSG_CHANNEL_DATA,)) + u32(remote) + string(stdin[sent:sent + n]))
                    sent += n
                    remote_window -= n
                if sent == len(stdin):
                    sending = False
                    p.send(bytes((MSG_CHANNEL_EOF,)) + u32(remote))
                    p.flush()  # the script is out only once this returns: the phase says so
                    p.quick = True  # from here on the client only reads (see packets.Packets)
                    host.next_phase("reading the output")
            kind, payload = self.message()
            r = Reader(payload, 1)
            if r.u32() != CHANNEL:
                raise PacketError(f"the server sent message {kind} for a channel that was never opened")
            if kind == MSG_CHANNEL_DATA or kind == MSG_CHANNEL_EXTENDED_DATA:
                to_err = kind == MSG_CHANNEL_EXTENDED_DATA and r.u32() == 1
                data = r.string()
                n = len(data)
                if n > MAX_DATA:
                    raise PacketError(f"the server sent {n} bytes of channel data in one message, more than "
                                      f"the {MAX_DATA} this client allows")
                if n > window_left:
                    raise PacketError("the server sent more than the channel's window")
                window_left -= n
                unacked += n
                if eof:  # nothing may follow EOF (RFC 4254 5.3): ssh drops it too
                    continue
                if kind == MSG_CHANNEL_DATA:
                    s.out.append(data)
                elif to_err:
                    s.err.append(data)
                s.size += n
                if s.size > limit:
                    raise host.too_much()
                if unacked >= window // 2 and not eof:
                    p.send(bytes((MSG_CHANNEL_WINDOW_ADJUST,)) + u32(remote) + u32(unacked))
                    window_left += unacked
                    unacked = 0
            elif kind == MSG_CHANNEL_WINDOW_ADJUST:
                remote_window = min(remote_window + r.u32(), 0xFFFFFFFF)
            elif kind == MSG_CHANNEL_SUCCESS:
                pass  # the exec was accepted; the output says the rest
            elif kind == MSG_CHANNEL_FAILURE:
                t = host.target
                raise SSHError("protocol", f"{t.hostname} refused to run {command!r} (exec request denied)")
            elif kind == MSG_CHANNEL_REQUEST:
                name = r.text()
                want_reply = r.boolean()
                if name == "exit-status":
                    s.rc = r.u32()
                elif want_reply:  # keepalive@openssh.com and the like
                    p.send(bytes((MSG_CHANNEL_FAILURE,)) + u32(remote))
            elif kind == MSG_CHANNEL_EOF:
                eof = True
                sending = False
                if host.phase != "reading the output":
                    host.phase = "reading the output"
            elif kind == MSG_CHANNEL_CLOSE:
                closed = True
            else:
                raise self._unexpected(kind, "on the session channel")
            if closed or (eof and s.rc >= 0):  # nothing may follow EOF but requests (RFC 4254 5.3)
                p.send(bytes((MSG_CHANNEL_CLOSE,)) + u32(remote))
                try:
                    p.flush()
                except OSError:
                    pass
                return s


def exec_once(host: Host, packets: Packets, host_keys: tuple[str, ...], banner_deadline: float,
              command: str, stdin: bytes, window: int) -> Session:
    """Log in to `host` over `packets` (a connected socket), run `command` with `stdin`, return what it
    gave. Raises Unsupported (nothing about the user sent yet), SSHError, or what the host maps itself:
    EOFError, TimeoutError, OSError, PacketError, KexError, packets.BannerError, wireformat.Truncated
    or wireformat.Malformed."""
    c = Client(host, packets, host_keys)
    host.phase = "banner"
    c.start()
    version = packets.read_version(banner_deadline)
    host.phase = "key exchange"
    if not (version.startswith("SSH-2.0-") or version.startswith("SSH-1.99-")):
        raise Unsupported(f"Incompatible version ({version[4:].split('-')[0][:20]!r} instead of 2.0)")
    c.first_kex(version)
    c.login()
    return c.run(command, stdin, window)

