"""One loop for every ssh child of the process (`--ssh openssh`): one thread, one poll(2) set.

A host's thread starts ssh and hands the conversation over (`drive`): this loop writes the rest of the
script to ssh's stdin, reads its stdout and stderr, and ends the conversation when ssh has closed both
and exited, or when the deadline passes, the output cap is crossed or the host is aborted (then ssh's
process group is killed). The host's thread sleeps meanwhile: no thread per host waking up to poll its
pipes. It is also told once when ssh has printed nothing for a while (the slow-host note), from this
loop's thread.

Where the system offers it (Linux: pidfd_open), ssh's exit is one more event of the poll set; elsewhere
the loop looks at each child every TICK seconds. A child that exited while something else still holds
its pipes open (a ControlPersist master started by it) is done after EXIT_GRACE.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import math
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO, Any

READ_SIZE = 1 << 16  # a pipe holds 64 KiB: one read empties it
TICK = 0.25  # without a pidfd: how often a child is looked at to see whether it exited
EXIT_GRACE = 0.5  # after ssh exited: how long its pipes may stay open (a ControlPersist master's copy)

# What ended a conversation other than ssh's own end
TIMEOUT, ABORTED, OVERFLOW, FAILED = "timeout", "aborted", "overflow", "failed"

_IN, _OUT, _ERR, _EXIT = range(4)


class Conversation:
    """One ssh child's conversation: its pipes, what it printed, and how it ended (`outcome`: None when
    ssh closed its output and exited, else TIMEOUT, ABORTED, OVERFLOW or FAILED). `done` is set once."""

    def __init__(self, proc: subprocess.Popen[bytes], data: bytes, deadline: float, max_output: int,
                 slow_after: float | None = None, on_slow: Callable[[], None] | None = None) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self.data, self.sent = data, 0
        self.deadline, self.max_output = deadline, max_output
        self.slow_after, self.on_slow = slow_after, on_slow
        self.out, self.err = bytearray(), bytearray()
        self.size = 0
        self.outcome: str | None = None
        self.failure: BaseException | None = None
        self.done = threading.Event()
        self.exited = False
        self.open_outputs = 2
        self.files: dict[int, IO[bytes]] = {}  # fd -> the pipe's file (closed through it: Popen owns it)
        self.pidfd: int | None = None
        self.driver: Driver | None = None

    def kill(self) -> None:
        """SIGKILL ssh's process group (ssh and its ProxyCommands), unless ssh was already reaped."""
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass

    def abort(self) -> None:
        """From any thread: kill ssh and end the conversation as ABORTED."""
        self.kill()
        if self.driver is not None:
            self.driver.poke(self)


class Driver:
    """The loop's thread and its epoll (or poll) set; `drive` may be called from any thread."""

    def __init__(self, *, epoll: bool = True, pidfd: bool = True) -> None:
        """`epoll`, `pidfd`: use them where the system has them (False: poll(2), and a look every TICK,
        as on systems without them)."""
        # epoll where there is one (Linux: the kernel keeps the set, a wait costs what is ready), else poll(2)
        use_epoll = epoll and hasattr(select, "epoll")
        self._poll: Any = select.epoll() if use_epoll else select.poll()
        self._ms = not use_epoll  # poll(2) waits in milliseconds, epoll in seconds
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poll.register(self._wake_r, select.POLLIN)  # POLLIN/POLLOUT equal EPOLLIN/EPOLLOUT (Linux)
        self._lock = threading.Lock()
        self._new: list[Conversation] = []
        self._poked: list[Conversation] = []
        self._fds: dict[int, tuple[Conversation, int]] = {}  # fd -> (its conversation, _IN/_OUT/_ERR/_EXIT)
        self._live: set[Conversation] = set()
        self._timers: list[tuple[float, int, Conversation, str]] = []
        self._seq = itertools.count()
        self._pidfd = pidfd and hasattr(os, "pidfd_open")
        self.thread = threading.Thread(target=self._loop, name="bsdcrypt-ssh-driver", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------------ from the hosts' threads

    def drive(self, conv: Conversation) -> None:
        """Take `conv` over: write what fits of its script now, the loop does the rest."""
        stdin = conv.proc.stdin
        assert stdin is not None
        fd = stdin.fileno()
        os.set_blocking(fd, False)
        try:
            conv.sent = os.write(fd, conv.data) if conv.data else 0
        except BlockingIOError:
            conv.sent = 0
        except OSError:  # ssh is gone already (EPIPE): what it printed tells why
            conv.sent = len(conv.data)
        if conv.sent >= len(conv.data):
            stdin.close()
        conv.driver = self
        with self._lock:
            self._new.append(conv)
        self._wake()

    def poke(self, conv: Conversation) -> None:
        with self._lock:
            self._poked.append(conv)
        self._wake()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except BlockingIOError:  # the pipe is full of wake-ups already
            pass

    # ------------------------------------------------------------------ the loop's thread

    def _loop(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # a bug in the loop itself: no host may wait for it until its deadline
            self._abandon_all(exc)

    def _run(self) -> None:
        fds, live, timers = self._fds, self._live, self._timers
        while True:
            wait = max(0.0, timers[0][0] - time.monotonic()) if timers else None
            timeout = (math.ceil(1000 * wait) if self._ms else wait) if wait is not None else (None if self._ms else -1)
            for fd, _ in self._poll.poll(timeout):
                if fd == self._wake_r:
                    self._take_news()
                    continue
                conv, role = fds.get(fd, (None, 0))
                if conv is None or conv not in live:
                    continue
                try:
                    if role == _OUT or role == _ERR:
                        self._read(conv, fd, role)
                    elif role == _IN:
                        self._write(conv, fd)
                    else:
                        self._exited(conv)
                except Exception as exc:  # a bug: that host gets a row, the others go on
                    self._fail(conv, exc)
            if timers and timers[0][0] <= time.monotonic():
                self._timers_due()

    def _fail(self, conv: Conversation, exc: Exception) -> None:
        conv.failure = exc
        conv.kill()
        try:
            self._finish(conv, FAILED)
        except Exception:  # ending it failed too (its fds in a state _close did not expect): let go anyway
            self._abandon(conv, exc)

    def _abandon(self, conv: Conversation, exc: BaseException) -> None:
        """End `conv` as FAILED whatever state its fds are in; never raises."""
        conv.failure = conv.failure or exc
        with contextlib.suppress(Exception):
            conv.kill()
        self._live.discard(conv)
        fds = list(conv.files) + ([conv.pidfd] if conv.pidfd is not None else [])
        for fd in fds:
            with contextlib.suppress(Exception):
                self._poll.unregister(fd)
            self._fds.pop(fd, None)
        for fd in fds:
            pipe = conv.files.pop(fd, None)
            with contextlib.suppress(Exception):
                if pipe is not None:
                    pipe.close()
                else:
                    os.close(fd)  # the pidfd
        conv.pidfd = None
        conv.data, conv.on_slow = b"", None
        conv.outcome = FAILED
        conv.done.set()

    def _abandon_all(self, exc: BaseException) -> None:
        """The loop's thread is ending on an error: every conversation it has or was handed ends FAILED
        (the next `driver()` call starts a new loop)."""
        held = self._lock.acquire(timeout=1.0)  # not forever: the error may have come while it was held
        try:
            new, self._new = self._new, []
        finally:
            if held:
                self._lock.release()
        for conv in [*self._live, *new]:
            self._abandon(conv, exc)

    def _take_news(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        with self._lock:
            new, self._new = self._new, []
            poked, self._poked = self._poked, []
        for conv in new:
            try:
                self._start(conv)
            except Exception as exc:
                self._fail(conv, exc)
        for conv in poked:
            if conv in self._live:
                self._finish(conv, ABORTED)

    def _add(self, conv: Conversation, pipe: IO[bytes], role: int, events: int) -> None:
        fd = pipe.fileno()
        if role != _IN:
            # never a blocking read in the loop: an event of one batch can reach a fd number that was
            # closed and reused within that batch (another host's pipe, with nothing to read yet)
            os.set_blocking(fd, False)
        conv.files[fd] = pipe
        self._fds[fd] = (conv, role)
        self._poll.register(fd, events)

    def _start(self, conv: Conversation) -> None:
        self._live.add(conv)
        proc = conv.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._add(conv, proc.stdout, _OUT, select.POLLIN)
        self._add(conv, proc.stderr, _ERR, select.POLLIN)
        if not proc.stdin.closed:
            self._add(conv, proc.stdin, _IN, select.POLLOUT)
        if self._pidfd:
            try:
                conv.pidfd = os.pidfd_open(proc.pid)
            except OSError as exc:  # this child is looked at every TICK
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
                    self._pidfd = False  # an old kernel, or a sandbox refusing it: for every child from now on
        now = time.monotonic()
        if conv.pidfd is not None:
            self._fds[conv.pidfd] = (conv, _EXIT)
            self._poll.register(conv.pidfd, select.POLLIN)
        else:
            self._at(now + TICK, conv, "tick")
        self._at(conv.deadline, conv, "deadline")
        if conv.slow_after is not None and conv.on_slow is not None:
            self._at(now + conv.slow_after, conv, "slow")

    def _at(self, when: float, conv: Conversation, what: str) -> None:
        heapq.heappush(self._timers, (when, next(self._seq), conv, what))

    def _read(self, conv: Conversation, fd: int, role: int) -> bool:
        """Read what the pipe holds now; True if something was read (and the conversation goes on)."""
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:  # a stale event: nothing to read now
            return False
        if not chunk:
            self._close(conv, fd)
            conv.open_outputs -= 1
            if conv.open_outputs == 0 and (conv.exited or conv.pidfd is None):
                self._finish(conv, None)  # without a pidfd, the host's thread waits for the exit
            return False
        (conv.out if role == _OUT else conv.err).extend(chunk)
        conv.size += len(chunk)
        if conv.size > conv.max_output:
            conv.kill()
            self._finish(conv, OVERFLOW)
            return False
        return True

    def _drain(self, conv: Conversation) -> None:
        """Read what ssh's pipes hold now (it exited: all it wrote is there), up to the output cap."""
        for fd in list(conv.files):
            role = self._fds[fd][1]
            if role == _IN:
                continue
            while conv in self._live and fd in conv.files and self._read(conv, fd, role):
                pass

    def _write(self, conv: Conversation, fd: int) -> None:
        try:
            conv.sent += os.write(fd, conv.data[conv.sent:conv.sent + READ_SIZE])
        except BlockingIOError:
            return
        except OSError:  # EPIPE: ssh stopped reading (it failed: its stderr says why)
            conv.sent = len(conv.data)
        if conv.sent >= len(conv.data):
            self._close(conv, fd)

    def _exited(self, conv: Conversation) -> None:
        conv.exited = True
        if conv.pidfd is not None:
            self._drop_pidfd(conv)
        if conv.open_outputs == 0:
            self._finish(conv, None)
        else:  # something else holds ssh's pipes open: it gets a moment to let go
            self._at(time.monotonic() + EXIT_GRACE, conv, "grace")

    def _timers_due(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, conv, what = heapq.heappop(self._timers)
            if conv not in self._live:
                continue
            try:
                if what == "deadline":
                    conv.kill()
                    self._finish(conv, TIMEOUT)
                elif what == "slow":
                    if conv.size == 0 and conv.on_slow is not None:
                        with contextlib.suppress(Exception):  # a note that cannot be shown ends nothing
                            conv.on_slow()
                elif what == "grace":
                    # the EOF events may not have been polled yet (a long batch): what ssh wrote is read first
                    self._drain(conv)
                    if conv in self._live:
                        self._finish(conv, None)
                elif what == "tick" and not conv.exited:
                    if conv.proc.poll() is not None:
                        self._exited(conv)
                    else:
                        self._at(now + TICK, conv, "tick")
            except Exception as exc:
                self._fail(conv, exc)

    def _close(self, conv: Conversation, fd: int) -> None:
        self._poll.unregister(fd)
        del self._fds[fd]
        conv.files.pop(fd).close()

    def _drop_pidfd(self, conv: Conversation) -> None:
        assert conv.pidfd is not None
        self._poll.unregister(conv.pidfd)
        del self._fds[conv.pidfd]
        os.close(conv.pidfd)
        conv.pidfd = None

    def _finish(self, conv: Conversation, outcome: str | None) -> None:
        self._live.discard(conv)
        for fd in list(conv.files):
            self._close(conv, fd)
        if conv.pidfd is not None:
            self._drop_pidfd(conv)
        conv.data = b""  # fed, or no longer wanted
        conv.on_slow = None  # (a bound method of the host: no cycle through the loop's references)
        conv.outcome = outcome
        conv.done.set()
        # the timers of ended conversations go soon: they would keep each one's output alive until its deadline
        if len(self._timers) > 16 + 2 * len(self._live):
            self._timers[:] = [t for t in self._timers if t[2] in self._live]
            heapq.heapify(self._timers)


_driver: Driver | None = None
_driver_lock = threading.Lock()


def driver() -> Driver:
    """The process's one loop, started on first use."""
    global _driver
    with _driver_lock:
        if _driver is None or not _driver.thread.is_alive():
            _driver = Driver()
        return _driver
