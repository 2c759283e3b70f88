"""paramiko transport tuning: a buffered socket, a thread-free handshake deadline, algorithm order,
and no logging work nobody reads."""

from __future__ import annotations

import socket
import time
from logging import DEBUG
from typing import Any

import paramiko
from paramiko import util
from paramiko.packet import Packetizer

from bsdcrypt.ssh.knownhosts import KnownKey


class WireSocket:
    """The TCP socket as paramiko's packet layer sees it: buffered reads, quick ACKs (Linux).

    paramiko reads every packet with two exact-size `recv` calls (length, then the rest), so a
    host costs ~35 reads, each a system call that also drops and re-takes the GIL. One `recv`
    of up to 16 KiB takes whatever the kernel holds (usually a whole flight of packets) and
    the following reads are served from it.

    After authentication sshd writes two small packets back to back (the host-keys notice, then
    the channel-open confirmation); with Nagle on the server side and the client's delayed ACK,
    the second one waits ~40 ms for an ACK the client has no reason to send. Re-arming
    TCP_QUICKACK after each read acknowledges at once and removes that stall from every host.
    `quick` False leaves the ACKs to ride on the client's next message: fleet-audit's one-shot loop
    answers every server message of the handshake, login and exec at once (each answer carries the
    ACK), and needs the quick ACKs only while it reads the output and waits for the close, where it
    sends nothing (each quick ACK is a segment of its own: on loopback its delivery is the client's
    CPU too).
    """

    __slots__ = ("_sock", "send", "_buf", "_pos", "quick")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.send = sock.send  # paramiko's packet writer: straight to the socket, no __getattr__
        self._buf = b""
        self._pos = 0
        self.quick = True

    def recv(self, n: int) -> bytes:
        buf, pos = self._buf, self._pos
        if not buf:
            data = self._sock.recv(max(n, _READ_SIZE))
            if self.quick:
                self._quickack()
            if len(data) <= n:
                return data
            buf, pos = data, 0
        stop = pos + n
        if stop >= len(buf):  # the rest of the buffer: let it go
            self._buf, self._pos = b"", 0
        else:
            self._buf, self._pos = buf, stop
        return buf[pos:stop] if pos or stop < len(buf) else buf

    def take(self, n: int) -> bytes | None:
        """The next `n` bytes if the buffer holds them all (no system call), else None."""
        buf, pos = self._buf, self._pos
        stop = pos + n
        size = len(buf)
        if stop > size or n <= 0:
            return None
        if stop == size:
            self._buf, self._pos = b"", 0
            return buf[pos:] if pos else buf
        self._pos = stop
        return buf[pos:stop]

    def _quickack(self) -> None:
        if _TCP_QUICKACK:
            try:
                self._sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
            except OSError:
                pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


_READ_SIZE = 16384
_TCP_QUICKACK: int = getattr(socket, "TCP_QUICKACK", 0)


HEARD_KEPT = 256
MAX_PRE_BANNER = 64 * 1024  # RFC 4253 4.2 lets a server send lines before its version; none sends this much
# OpenSSH's PACKET_MAX_SIZE (crypto/openssh/packet.c): a longer packet_length is "Bad packet length" to
# ssh; paramiko would read it all (4 GiB at most) into one buffer. Plus room for a MAC (64 at most).
MAX_PACKET = 256 * 1024
_MAX_READ = MAX_PACKET + 64


class _DeadlinePacketizer(Packetizer):
    """paramiko's Packetizer with the handshake timeout kept as a deadline.

    paramiko starts a `threading.Timer` thread per connection for it (one more thread to create,
    schedule and cancel for every host); the packet reader already wakes up every 0.1 s to call
    `handshake_timed_out()`, so comparing the clock there gives the same timeout without a thread.
    """

    _hs_deadline: float | None = None
    _hs_done: bool = False
    heard = b""  # the first bytes the peer sent before its SSH banner (see _read_timeout)
    heard_size = 0

    def _read_timeout(self, timeout: float) -> bytes:
        """paramiko reads the lines before and of the banner (and nothing else) through this: keep what
        the peer said, so an error can tell a peer that closed at once from one that spoke something
        other than SSH, and stop a peer that floods it (paramiko would buffer an endless line whole)."""
        data: bytes = super()._read_timeout(timeout)  # type: ignore[misc]
        self.heard_size += len(data)
        if len(self.heard) < HEARD_KEPT:
            self.heard += data[: HEARD_KEPT - len(self.heard)]
        if self.heard_size > MAX_PRE_BANNER:
            raise EOFError(f"more than {MAX_PRE_BANNER} bytes without an SSH banner")
        return data

    def read_all(self, n: int, check_rekey: bool = False) -> bytes:
        """paramiko's read of `n` bytes, refused when `n` is more than a packet can be: paramiko takes the
        length from the packet itself, so a hostile server could make it gather gigabytes (895 MB in
        8 s on loopback before the host's deadline ended it)."""
        if n > _MAX_READ:
            raise paramiko.SSHException(f"the server announced a packet of {n} bytes; ssh accepts {MAX_PACKET} at most")
        return bytes(super().read_all(n, check_rekey))

    def start_handshake(self, timeout: float) -> None:
        if self._hs_deadline is None:
            self._hs_deadline = time.monotonic() + float(timeout)

    def handshake_timed_out(self) -> bool:
        deadline = self._hs_deadline
        return deadline is not None and not self._hs_done and time.monotonic() >= deadline

    def complete_handshake(self) -> None:
        if self._hs_deadline is not None:
            self._hs_done = True

class _Transport(paramiko.Transport):
    """paramiko's Transport without the work done for log lines that no handler shows.

    paramiko formats a DEBUG line for ~36 events of every connection and, for each SSH_MSG_DEBUG the
    server sends (sshd sends one per authorized_keys option, e.g. a forced command or `restrict`),
    makes the message printable byte by byte in Python (util.safe_string: ~0.1 ms for a 170-byte
    message). Both now happen only when the paramiko logger is enabled for that level (`-v` does not
    enable it). The algorithm lists are read 16 times a handshake, each time filtered against
    `disabled_algorithms`, which bsdcrypt never sets: they are returned as they are when it is empty.
    """

    def _log(self, level: int, msg: Any, *args: Any) -> None:
        if self.logger.isEnabledFor(level):
            super()._log(level, msg, *args)  # type: ignore[misc]

    def _parse_debug(self, m: paramiko.Message) -> None:
        m.get_boolean()  # always_display
        msg = m.get_string()
        m.get_string()  # language
        if self.logger.isEnabledFor(DEBUG):
            self._log(DEBUG, f"Debug msg: {util.safe_string(msg)!r}")

    _kh: tuple[Any, bytes, bytes] | None = None  # (K, H, the encoding of K || H) of the last key exchange

    def _compute_key(self, id: str, nbytes: int) -> bytes:
        """paramiko encodes K and H again for each of the six keys of a key exchange (its mpint
        encoding is Python); here once per exchange (`session_key`)."""
        hash_algo = getattr(self.kex_engine, "hash_algo", None)
        add_k = getattr(self, "_add_K", None)
        if hash_algo is None or add_k is None:  # paramiko's own fallbacks (sha1, older paramiko)
            return bytes(super()._compute_key(id, nbytes))  # type: ignore[misc]
        k: Any = self.K
        h: Any = self.H
        kh = self._kh
        if kh is None or kh[0] != k or kh[1] != h:
            m = paramiko.Message()
            add_k(m)
            m.add_bytes(h)
            kh = self._kh = (k, h, m.asbytes())
        session_id: Any = self.session_id
        return session_key(hash_algo, kh[2], id, session_id, nbytes)

    def _filter_algorithm(self, type_: str) -> tuple[str, ...]:
        if not self.disabled_algorithms:
            return tuple(getattr(self, "_preferred_" + type_))
        return tuple(super()._filter_algorithm(type_))  # type: ignore[misc]


def session_key(hash_algo: Any, k_h: bytes, letter: str, session_id: bytes, nbytes: int) -> bytes:
    """RFC 4253 7.2: HASH(K || H || letter || session_id), extended by HASH(K || H || what came so far)
    until `nbytes` long; `k_h` is K and H as the exchange encodes them."""
    out = sofar = hash_algo(k_h + letter.encode("ascii") + session_id).digest()
    while len(out) < nbytes:
        digest = hash_algo(k_h + sofar).digest()
        out += digest
        sofar += digest
    return bytes(out[:nbytes])


def _host_key_algorithms(known: list[KnownKey]) -> tuple[str, ...]:
    """Like ssh(1): ask first for the key types already known for this host."""
    preferred: list[str] = list(getattr(paramiko.Transport, "_preferred_keys"))  # noqa: B009
    first: list[str] = []
    for k in known:
        algs = ["rsa-sha2-512", "rsa-sha2-256"] if k.key_type == "ssh-rsa" else [k.key_type]
        first += [a for a in algs if a in preferred and a not in first]
    return tuple(first + [a for a in preferred if a not in first])


def _cipher_order() -> tuple[str, ...]:
    """AES-GCM first: an AEAD needs no separate MAC, and paramiko checks MACs byte by byte in Python
    (about a third of its per-packet CPU). CTR modes stay as the fallback for older servers."""
    available: list[str] = list(getattr(paramiko.Transport, "_preferred_ciphers"))  # noqa: B009
    gcm = [c for c in ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com") if c in available]
    return tuple(gcm + [c for c in available if c not in gcm])


_CIPHERS = _cipher_order()
