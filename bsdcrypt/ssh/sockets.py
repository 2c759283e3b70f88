"""The byte stream paramiko's Transport runs on: a TCP socket, or a ProxyCommand's end of a socket pair,
both counted against a byte budget.

A host may send at most `budget` bytes over the whole connection (banner, key exchange, output): past it
the read fails and the host's row says it printed too much. The budget lives in the socket, below
paramiko, so nothing a host sends can make the client hold more than that.

A ProxyCommand runs as ssh(1) runs it, `$SHELL -c "exec COMMAND"` ($SHELL unset or empty: /bin/sh), in a
session of its own, its stdin and stdout one end of a socket pair: paramiko gets a real socket either way
(a deadline, `shutdown` from another thread and poll() work the same), and closing kills the command's
whole process group.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import subprocess
import threading

_STDERR_KEEP = 8192  # bytes of a ProxyCommand's stderr kept (the end of it)
IDLE_POLL = 1.0  # seconds: the shortest wait a read on a BudgetSocket makes before it times out
_HEARD_KEEP = 256  # bytes of what the peer sent first, kept for the error rows
_TERM_WAIT = 0.5  # after SIGTERM to its process group: how long the command has before SIGKILL

_live: set[ProxyCommand] = set()  # started and not closed yet
_live_lock = threading.Lock()


class TooMuch(OSError):
    """The host sent more than its byte budget."""

    def __init__(self, budget: int) -> None:
        super().__init__(errno.EMSGSIZE, f"the host sent more than {budget} bytes")
        self.budget = budget


class BudgetSocket(socket.socket):
    """A connected socket whose reads stop (TooMuch) once more than `budget` bytes have come in."""

    budget: int = 0
    received: int = 0
    exceeded: bool = False
    heard: bytes = b""  # the first bytes the peer sent (what a service that is not sshd says)

    @classmethod
    def wrap(cls, sock: socket.socket, budget: int) -> BudgetSocket:
        new = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        new.budget = budget
        return new

    def recv(self, n: int, flags: int = 0) -> bytes:
        data = super().recv(n, flags)
        if len(self.heard) < _HEARD_KEEP:
            self.heard += data[:_HEARD_KEEP - len(self.heard)]
        self.received += len(data)
        if self.received > self.budget:
            self.exceeded = True
            raise TooMuch(self.budget)
        return data

    def settimeout(self, value: float | None) -> None:
        """At least IDLE_POLL: paramiko's reader thread polls a quiet connection every 0.1 s to see if it
        should stop, ~10 wake-ups a second per host in flight, for nothing here (every close and abort
        shuts the socket down, which ends the wait at once; deadlines are bsdcrypt's own)."""
        super().settimeout(None if value is None else max(value, IDLE_POLL))

    def stop(self) -> None:
        """From any thread: end every wait on this socket at once (EOF for paramiko's reader)."""
        try:
            self.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def connect_tcp(host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to the first address of `host` that answers within `timeout` each."""
    last: OSError | None = None
    for family, socktype, proto, _, addr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, socktype, proto)
        sock.settimeout(timeout)
        try:
            sock.connect(addr)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise last or OSError(errno.EHOSTUNREACH, f"no address for {host}")


def proxy_shell() -> str:
    """The shell a ProxyCommand runs under, as ssh(1) chooses it: $SHELL, or /bin/sh if unset or empty."""
    return os.environ.get("SHELL") or "/bin/sh"


def kill_all() -> int:
    """Kill the process group of every ProxyCommand not closed yet (an interrupted run's last sweep)."""
    with _live_lock:
        live = list(_live)
    for proxy in live:
        proxy.kill()
    return len(live)


class ProxyCommand:
    """A running ProxyCommand: `sock` is our end of its stdin/stdout."""

    def __init__(self, command: str, budget: int) -> None:
        self.command = command
        ours, theirs = socket.socketpair()
        try:
            self.process = subprocess.Popen(
                [proxy_shell(), "-c", "exec " + command],
                stdin=theirs.fileno(), stdout=theirs.fileno(), stderr=subprocess.PIPE, start_new_session=True,
            )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        assert self.process.stderr is not None
        os.set_blocking(self.process.stderr.fileno(), False)
        self._stderr = bytearray()
        self._lock = threading.Lock()
        self._reaped = False
        self.sock = BudgetSocket.wrap(ours, budget)
        with _live_lock:
            _live.add(self)

    def stderr_tail(self) -> str:
        """The last lines it printed on stderr so far, on one line, control characters blanked."""
        stream = self.process.stderr
        with self._lock:
            if stream is not None and not stream.closed:
                try:
                    while chunk := os.read(stream.fileno(), 65536):
                        self._stderr += chunk
                        del self._stderr[:-_STDERR_KEEP]
                except (BlockingIOError, OSError):
                    pass
            text = bytes(self._stderr).decode("utf-8", "replace")
        lines = [" ".join(re.sub(r"[\x00-\x1f\x7f]", " ", ln).split()) for ln in text.splitlines()]
        out = " / ".join([ln for ln in lines if ln][-3:])
        return out if len(out) <= 300 else "…" + out[-299:]

    def how_it_ended(self) -> str:
        """`exited with status N`, `was killed by SIGX` or `is still running` (after a short wait)."""
        try:
            rc = self.process.wait(1.0)
        except subprocess.TimeoutExpired:
            return "is still running"
        if rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.valid_signals() else str(-rc)
            return f"was killed by {name}"
        return f"exited with status {rc}"

    def kill(self) -> None:
        """From any thread: end the connection and kill the command's process group (what it started too)."""
        self.sock.stop()
        self._killpg(signal.SIGKILL)

    def _killpg(self, sig: int) -> None:
        with self._lock:
            if self._reaped:  # the group was found empty: its id may be another process's by now
                return
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:  # the group is empty: never signal that id again
                self._reaped = True
            except OSError:
                pass

    def close(self) -> None:
        """SIGTERM to the process group, a moment, then SIGKILL to what is left; reaped; pipes closed."""
        self.sock.stop()
        self._killpg(signal.SIGTERM)
        try:
            self.process.wait(_TERM_WAIT)
        except subprocess.TimeoutExpired:
            pass
        self._killpg(signal.SIGKILL)
        try:
            self.process.wait(1.0)
        except subprocess.TimeoutExpired:
            pass
        self.sock.close()
        if self.process.stderr is not None:
            self.process.stderr.close()
        with _live_lock:
            _live.discard(self)
