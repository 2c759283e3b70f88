"""The SSH binary packet protocol (RFC 4253 section 6) over a TCP socket, for bsdcrypt.ssh.direct.

Only what fleet-audit's one exec needs: the version lines, plain packets until the first NEWKEYS, then
AES-GCM (RFC 5647 as OpenSSH does it: the length in clear as associated data, a 64-bit invocation
counter in the nonce; no sequence numbers are kept: AES-GCM does not use them, and this client never
sends SSH_MSG_UNIMPLEMENTED, the one message that quotes one). Packets sent are queued and go out in
one write just before the next read waits, so a login or an exec with its script costs one system
call, not one per message.
"""

from __future__ import annotations

import socket
import time

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bsdcrypt.ssh.transport import HEARD_KEPT, MAX_PACKET, MAX_PRE_BANNER

READ_SIZE = 16384
_COUNTER = (1 << 64) - 1
_TCP_QUICKACK: int = getattr(socket, "TCP_QUICKACK", 0)
MAX_BANNER_LINES = 1024  # sshd's own limit on lines before the version (ssh_exchange_identification)
NEXT_LINE_WAIT = 2.0  # after a line that is not the version, the next must come within this (paramiko's rule)


class PacketError(Exception):
    """The peer broke the packet protocol (a length, padding or tag that cannot be right)."""


class BannerError(Exception):
    """No usable SSH version line (the message says what came instead)."""


class Sealer:
    """One direction's AES-GCM key, fixed nonce part and invocation counter."""

    __slots__ = ("aead", "fixed", "counter")

    def __init__(self, key: bytes, iv: bytes) -> None:
        self.aead = AESGCM(key)
        self.fixed = iv[:4]
        self.counter = int.from_bytes(iv[4:12], "big")

    def nonce(self) -> bytes:
        n = self.fixed + self.counter.to_bytes(8, "big")
        self.counter = (self.counter + 1) & _COUNTER
        return n


class Packets:
    """Reads and writes SSH packets on `sock` until `deadline` (time.monotonic()).

    The socket keeps its own timeout (a poll interval); each wait checks the deadline, so a peer that
    trickles a byte at a time cannot stretch it. `heard` keeps the first bytes before the version line
    (what a peer that is not sshd said); `quick` re-arms TCP_QUICKACK after each read (see
    transport.WireSocket: only useful while the client reads and sends nothing)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.quick = False
        self.heard = b""
        self.heard_size = 0
        self._buf = b""
        self._pos = 0
        self._out: list[bytes] = []
        self._seal: Sealer | None = None
        self._open: Sealer | None = None

    # -- the socket

    def flush(self) -> None:
        """Send what is queued. The socket's timeout is a poll interval, not a limit: a peer that reads
        slowly (a congested link, a busy host) has until the deadline, as for a read."""
        if not self._out:
            return
        data = memoryview(b"".join(self._out) if len(self._out) > 1 else self._out[0])
        self._out = []
        while data:
            if time.monotonic() >= self.deadline:
                raise TimeoutError("the host's deadline passed")
            try:
                sent = self.sock.send(data)
            except TimeoutError:  # nothing was sent: wait again
                continue
            data = data[sent:]

    def _recv(self, size: int) -> bytes:
        self.flush()
        while True:
            if time.monotonic() >= self.deadline:
                raise TimeoutError("the host's deadline passed")
            try:
                data = self.sock.recv(size)
            except TimeoutError:
                continue
            if self.quick and _TCP_QUICKACK:
                try:
                    self.sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
                except OSError:
                    pass
            if not data:
                raise EOFError("the connection was closed")
            return data

    def _take(self, n: int) -> bytes:
        buf, pos = self._buf, self._pos
        end = pos + n
        if end <= len(buf):
            self._pos = end
            return buf[pos:end]
        parts = [buf[pos:]]
        have = len(parts[0])
        while have < n:
            data = self._recv(max(n - have, READ_SIZE))
            parts.append(data)
            have += len(data)
        joined = b"".join(parts)
        self._buf, self._pos = joined, n
        return joined[:n]

    # -- version lines (RFC 4253 4.2)

    def read_version(self, banner_deadline: float) -> str:
        """The peer's version line, after any lines before it (as sshd allows: 1024 at most). A server
        that sends lines first sends its version right after them: a peer that said something else and
        then waits (an SMTP or FTP greeting) is not held for the whole ConnectTimeout."""
        deadline, self.deadline = self.deadline, min(self.deadline, banner_deadline)
        try:
            for _ in range(MAX_BANNER_LINES):
                line = self._line()
                if line.startswith(b"SSH-"):
                    try:
                        return line.rstrip(b"\r\n").decode("ascii")
                    except UnicodeDecodeError:
                        raise BannerError("Indecipherable protocol version") from None
                self.deadline = min(deadline, banner_deadline, time.monotonic() + NEXT_LINE_WAIT)
            raise BannerError(f"more than {MAX_BANNER_LINES} lines without an SSH banner")
        finally:
            self.deadline = deadline

    def _line(self) -> bytes:
        while True:
            buf, pos = self._buf, self._pos
            end = buf.find(b"\n", pos)
            if end >= 0:
                self._pos = end + 1
                return buf[pos:end + 1]
            if self.heard_size > MAX_PRE_BANNER:
                raise BannerError(f"more than {MAX_PRE_BANNER} bytes without an SSH banner")
            data = self._recv(READ_SIZE)
            self.heard_size += len(data)
            if len(self.heard) < HEARD_KEPT:
                self.heard += data[: HEARD_KEPT - len(self.heard)]
            self._buf, self._pos = buf[pos:] + data, 0

    def send_raw(self, data: bytes) -> None:
        self._out.append(data)

    # -- packets

    def send(self, payload: bytes) -> None:
        """Queue one packet (sent at the next read, or `flush`)."""
        seal = self._seal
        size = len(payload)
        if seal is None:  # block size 8, over the length field too
            pad = 8 - (size + 5) % 8
            if pad < 4:
                pad += 8
            body = bytes((pad,)) + payload + bytes(pad)
            self._out.append(len(body).to_bytes(4, "big") + body)
        else:  # AES-GCM: block size 16, over what is encrypted; padding needs no randomness in an AEAD
            pad = 16 - (size + 1) % 16
            if pad < 4:
                pad += 16
            body = bytes((pad,)) + payload + bytes(pad)
            head = len(body).to_bytes(4, "big")
            self._out.append(head + seal.aead.encrypt(seal.nonce(), body, head))

    def read(self) -> bytes:
        """The next packet's payload."""
        head = self._take(4)
        length = int.from_bytes(head, "big")
        if length > MAX_PACKET:
            raise PacketError(f"the server announced a packet of {length} bytes; ssh accepts {MAX_PACKET} at most")
        opened = self._open
        if opened is None:
            if length < 12 or (length + 4) % 8:
                raise PacketError(f"bad packet length {length}")
            body = self._take(length)
        else:
            if length < 16 or length % 16:
                raise PacketError(f"bad packet length {length}")
            try:
                body = opened.aead.decrypt(opened.nonce(), self._take(length + 16), head)
            except InvalidTag:
                raise PacketError("a packet failed its AES-GCM authentication") from None
        pad = body[0]
        if pad < 4 or pad > length - 1:
            raise PacketError(f"bad padding length {pad} in a packet of {length} bytes")
        return body[1:length - pad]

    def keys_out(self, key: bytes, iv: bytes) -> None:
        """NEWKEYS sent: what is sent from here on is encrypted."""
        self._seal = Sealer(key, iv)

    def keys_in(self, key: bytes, iv: bytes) -> None:
        """NEWKEYS read: what is read from here on is decrypted."""
        self._open = Sealer(key, iv)
