"""ProxyCommand: the command ssh_config names, run as the socket paramiko's transport reads and writes.

Waits use poll(2), not select(2): a run with hundreds of hosts in flight has descriptors above
FD_SETSIZE (1024), which select() cannot watch. Every ProxyCommand still running is listed, so that an
interrupted run can kill them all (`kill_all`).
"""

from __future__ import annotations

import errno
import math
import os
import re
import select
import signal
import subprocess
import threading
import time

import paramiko

_STDERR_KEEP = 8192  # bytes of a ProxyCommand's stderr kept (the end of it)
_STDERR_LINES = 3  # lines of it quoted in an error
_EXIT_WAIT = 1.0  # after the command closed its output: how long to wait for its exit status
_TERM_WAIT = 0.5  # after SIGTERM to its process group: how long the command has before SIGKILL
_READABLE = select.POLLIN | select.POLLHUP | select.POLLERR
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR

_live: set[ProxyCommandSocket] = set()  # started and not closed yet
_live_lock = threading.Lock()


def kill_all() -> int:
    """Kill the process group of every ProxyCommand not closed yet (an interrupted run's last sweep);
    returns how many there were."""
    with _live_lock:
        live = list(_live)
    for proxy in live:
        proxy.abort()
    return len(live)


def proxy_shell() -> str:
    """The shell a ProxyCommand runs under, as ssh(1) chooses it: $SHELL, or /bin/sh if unset or empty."""
    return os.environ.get("SHELL") or "/bin/sh"


def _poll(fds: list[tuple[int, int]], timeout: float | None) -> set[int]:
    """The descriptors of `fds` ((fd, events) pairs) that are ready within `timeout` seconds (None: no limit)."""
    poller = select.poll()
    for fd, events in fds:
        poller.register(fd, events)
    ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
    return {fd for fd, _ in poller.poll(ms)}


class ProxyCommandExited(paramiko.ProxyCommandFailure):
    """The ProxyCommand ended (or closed its output): how, and the end of what it printed on stderr."""

    def __init__(self, command: str, how: str, stderr_tail: str) -> None:
        super().__init__(command, how)
        self.how = how
        self.stderr_tail = stderr_tail

    def describe(self, when: str) -> str:
        said = f": {self.stderr_tail}" if self.stderr_tail else ", printing nothing on stderr"
        cmd = self.command if len(self.command) <= 80 else self.command[:79] + "…"
        when = f" {when}" if when else ""
        return f"ProxyCommand {self.how}{when}{said} (command: {cmd})"

    def __str__(self) -> str:
        return self.describe("")


def _tail_lines(data: bytes) -> str:
    """The last few non-empty lines of a command's stderr, on one line, printable only."""
    text = data.decode("utf-8", errors="replace")
    lines = [" ".join(re.sub(r"[\x00-\x1f\x7f]", " ", ln).split()) for ln in text.splitlines()]
    lines = [ln for ln in lines if ln][-_STDERR_LINES:]
    out = " / ".join(lines)
    return out if len(out) <= 300 else "…" + out[-299:]


class ProxyCommandSocket:
    """A ProxyCommand as the socket paramiko's transport reads and writes.

    Like ssh(1), the command runs as `$SHELL -c "exec COMMAND"` ($SHELL unset or empty: /bin/sh),
    in a session of its own (it cannot open a terminal to prompt), with its stdin and stdout as the
    connection. Closing or aborting kills its whole process group, also when the command itself has
    exited already (a relay it left behind, e.g. `cat <&3 &`, would keep the connection open). Unlike
    paramiko's ProxyCommand this one keeps the command's stderr (the end of it), turns the end of
    its output into an error naming the exit status and that stderr at once (paramiko's loops on
    EOF until the timeout, at full CPU), honours the socket timeout on writes too, and `close()`
    may be called from any thread: it kills the command's process group, which ends every wait,
    and the pipes are closed only once no read or write is using them.
    """

    def __init__(self, command: str) -> None:
        self.command = command
        self.process = subprocess.Popen(
            [proxy_shell(), "-c", "exec " + command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,
        )
        assert self.process.stdin and self.process.stdout and self.process.stderr
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()
        self._err: int | None = self.process.stderr.fileno()
        os.set_blocking(self._in, False)
        self._stderr = bytearray()
        self._timeout: float | None = None
        self._lock = threading.Lock()
        self._busy = 0
        self._closing = False
        self._released = False
        self._failure: ProxyCommandExited | None = None
        self._group_empty = False  # a killpg got ESRCH: never signal that group id again
        with _live_lock:
            _live.add(self)

    # -- the socket interface paramiko uses

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout

    @property
    def _closed(self) -> bool:  # paramiko's Transport.stop_thread looks at this
        return self._closing

    def recv(self, n: int) -> bytes:
        self._enter()
        try:
            deadline = None if self._timeout is None else time.monotonic() + self._timeout
            while True:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                fds = [(self._out, _READABLE)]
                if self._err is not None:
                    fds.append((self._err, _READABLE))
                ready = _poll(fds, wait)
                if self._err is not None and self._err in ready:
                    self._read_stderr()
                if self._out in ready:
                    data = os.read(self._out, n)
                    if data:
                        return data
                    raise self._exited("closed its output")
                if not ready:
                    raise TimeoutError("timed out")
        finally:
            self._leave()

    def send(self, data: bytes) -> int:
        self._enter()
        try:
            if not _poll([(self._in, _WRITABLE)], self._timeout):
                raise TimeoutError("timed out")
            try:
                return os.write(self._in, data)
            except BrokenPipeError:
                raise self._exited("stopped reading its input") from None
        finally:
            self._leave()

    def abort(self) -> None:
        """From any thread, without waiting: kill the command's process group, so that every read and
        write on it ends (whether or not the command itself is still running)."""
        self._killpg(signal.SIGKILL)

    def close(self) -> None:
        with self._lock:
            if self._closing:
                return
            self._closing = True
        self._kill()
        with _live_lock:
            _live.discard(self)
        with self._lock:
            idle = self._busy == 0
        if idle:
            self._release()

    def stderr_tail(self) -> str:
        """The last lines the command printed on stderr so far (read by the transport's waits)."""
        return _tail_lines(bytes(self._stderr))

    # -- internals

    def _enter(self) -> None:
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._closing:
                raise OSError(errno.EBADF, "ProxyCommand closed")
            self._busy += 1

    def _leave(self) -> None:
        with self._lock:
            self._busy -= 1
            release = self._closing and self._busy == 0
        if release:
            self._release()

    def _read_stderr(self) -> None:
        assert self._err is not None
        try:
            chunk = os.read(self._err, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            self._err = None  # EOF: the pipe is closed with the others
            return
        self._stderr += chunk
        if len(self._stderr) > _STDERR_KEEP:
            del self._stderr[: len(self._stderr) - _STDERR_KEEP]

    def _exited(self, what: str) -> ProxyCommandExited:
        """The command is ending: let it exit and finish its stderr (briefly), then describe how."""
        with self._lock:
            if self._failure is not None:
                return self._failure
        end = time.monotonic() + _EXIT_WAIT
        while self._err is not None and not self._closing:
            left = end - time.monotonic()
            if left <= 0 or not _poll([(self._err, _READABLE)], left):
                break
            self._read_stderr()
        try:
            rc: int | None = self.process.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            rc = None
        if rc is None:
            how = f"{what} (still running)"
        elif rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.valid_signals() else str(-rc)
            how = f"was killed by {name}"
        else:
            how = f"exited with status {rc}"
        failure = ProxyCommandExited(self.command, how, _tail_lines(bytes(self._stderr)))
        with self._lock:
            if self._failure is None:
                self._failure = failure
            return self._failure

    def _killpg(self, sig: int) -> bool:
        """Signal the command's process group (its session: start_new_session), even if the command has
        exited: what it started lives on in that group. The group id stays the command's pid, which
        the kernel does not hand out again while any process of the group is alive. False: no one left.

        Once a killpg found the group empty (ESRCH), it stays so for us: nothing of ours can join it, and
        once the leader is reaped its pid, so the group id, may be another process's. So no signal is
        sent to it again."""
        with self._lock:
            if self._group_empty:
                return False
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            with self._lock:
                self._group_empty = True
            return False
        except PermissionError:
            return False
        return True

    def _kill(self) -> None:
        """SIGTERM to the process group, a moment for the command to exit, then SIGKILL to whatever of
        the group is left (a child that ignores SIGTERM, or outlives the command)."""
        if not self._killpg(signal.SIGTERM):
            self.process.poll()
            return
        try:
            self.process.wait(_TERM_WAIT)
        except subprocess.TimeoutExpired:
            pass
        self._killpg(signal.SIGKILL)
        try:
            self.process.wait(1.0)
        except subprocess.TimeoutExpired:
            pass  # a process that survives SIGKILL (D state): Popen reaps it later

    def _release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
