"""The ssh loop (bsdcrypt/ssh/driver.py) when things go wrong around it: a readiness event for a pipe
with nothing in it (an fd number closed and reused within one poll batch), a batch long enough that the
exit grace ends before the EOF events are polled, an error inside the loop itself; and ssh_failure over
a hostile remote's stderr. A stand-in poll(2) set adds or holds back events; the children are plain
/bin/sh. Waits are bounded by generous limits, never by timing luck."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from bsdcrypt.ssh.driver import FAILED, TIMEOUT, Conversation, Driver

FAR = 600.0
WAIT = 60.0


class _Poll:
    """poll(2) as the loop uses it, with events added (`extra`) or held back (`held`: fds whose POLLIN
    is not reported), and an error raised once (`fail`)."""

    def __init__(self) -> None:
        self.real = select.poll()
        self.extra: list[tuple[int, int]] = []
        self.held: set[int] = set()
        self.fail: BaseException | None = None
        self.bad_unregister: set[int] = set()

    def register(self, fd: int, events: int) -> None:
        self.real.register(fd, events)

    def unregister(self, fd: int) -> None:
        if fd in self.bad_unregister:
            raise OSError(9, "stand-in unregister failure")
        self.real.unregister(fd)

    def poll(self, timeout: Any = None) -> list[tuple[int, int]]:
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc
        if timeout is None or timeout > 100:
            timeout = 100  # look again soon: what a test sets takes effect at once
        got = [(fd, ev) for fd, ev in self.real.poll(timeout) if fd not in self.held]
        extra, self.extra = self.extra, []
        return got + extra


@pytest.fixture()
def stand_in(monkeypatch: pytest.MonkeyPatch) -> tuple[Driver, _Poll]:
    poll = _Poll()
    monkeypatch.setattr(select, "poll", lambda: poll)
    return Driver(epoll=False, pidfd=False), poll


def _child(loop: Driver, script: str, deadline: float = FAR) -> Conversation:
    proc = subprocess.Popen(["/bin/sh", "-c", script], bufsize=0, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    conv = Conversation(proc, b"", time.monotonic() + deadline, 1 << 20)
    loop.drive(conv)
    return conv


def _started(conv: Conversation) -> None:
    for _ in range(600):
        if conv.files or conv.done.is_set():
            return
        time.sleep(0.1)
    raise AssertionError("the loop never took the conversation")


def _end(conv: Conversation) -> None:
    try:
        assert conv.done.wait(WAIT), "the loop never ended the conversation"
    finally:
        conv.kill()
        conv.proc.wait(WAIT)


def test_an_event_for_a_pipe_with_nothing_in_it_blocks_nothing(stand_in: tuple[Driver, _Poll]) -> None:
    loop, poll = stand_in
    conv = _child(loop, "sleep 600", deadline=2.0)  # prints nothing, ever
    _started(conv)
    assert conv.proc.stdout is not None
    poll.extra = [(conv.proc.stdout.fileno(), select.POLLIN)]  # as a stale event of a reused fd number
    _end(conv)  # a blocking read would hang the loop: no deadline would ever fire
    assert conv.outcome == TIMEOUT


def test_output_left_in_the_pipe_when_the_exit_grace_ends_is_read(stand_in: tuple[Driver, _Poll]) -> None:
    # the child prints and exits while something it started holds its pipes; the loop is "too busy" to
    # see the stdout events before the grace ends (they are held back): the grace reads the pipe first
    loop, poll = stand_in
    conv = _child(loop, "setsid sleep 600 & echo $! >&2; echo the-probe-output; exit 0")
    assert conv.proc.stdout is not None
    poll.held.add(conv.proc.stdout.fileno())
    try:
        _end(conv)
        assert conv.outcome is None and bytes(conv.out) == b"the-probe-output\n"
    finally:
        with contextlib.suppress(ValueError, OSError):
            os.kill(int(bytes(conv.err).split()[0]), signal.SIGKILL)  # the holder of the pipes


def test_an_error_in_the_loop_ends_every_conversation_at_once(stand_in: tuple[Driver, _Poll]) -> None:
    loop, poll = stand_in
    convs = [_child(loop, "sleep 600") for _ in range(3)]
    for conv in convs:
        _started(conv)
    poll.fail = RuntimeError("a bug in the loop")
    for conv in convs:
        _end(conv)  # not after their deadline (minutes away): now, their children killed
        assert conv.outcome == FAILED and isinstance(conv.failure, RuntimeError)


def test_a_conversation_whose_end_fails_is_still_ended(stand_in: tuple[Driver, _Poll]) -> None:
    loop, poll = stand_in
    conv = _child(loop, "sleep 600", deadline=1.0)
    _started(conv)
    assert conv.proc.stdout is not None
    poll.bad_unregister.add(conv.proc.stdout.fileno())  # closing its pipe fails, twice
    _end(conv)
    assert conv.outcome in (TIMEOUT, FAILED)
    poll.bad_unregister.clear()
    after = _child(loop, "echo still-driving")  # the loop goes on for the others
    _end(after)
    assert bytes(after.out) == b"still-driving\n"


def test_ssh_failure_reads_only_the_tail_of_a_hostile_stderr() -> None:
    code = ("from bsdcrypt.ssh.openssh import ssh_failure\n"
            "err = b'Host key for ' * 200_000 + b'\\n' + b'x' * 100 + b'\\nssh: connect to host h port 22: "
            "Connection refused\\n'\n"
            "f = ssh_failure(err, 'h')\n"
            "assert f is not None and f.kind == 'refused', f\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=240)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this system")
def test_one_pidfd_refused_for_want_of_fds_keeps_pidfds_for_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.pidfd_open
    calls: list[int] = []

    def once_out_of_fds(pid: int, flags: int = 0) -> int:
        calls.append(pid)
        if len(calls) == 1:
            raise OSError(24, "Too many open files")  # EMFILE under a big --parallel: passing
        return real(pid, flags)

    monkeypatch.setattr(os, "pidfd_open", once_out_of_fds)
    loop = Driver(epoll=True, pidfd=True)
    first = _child(loop, "echo one")
    _end(first)
    assert first.outcome is None and bytes(first.out) == b"one\n"  # looked at every TICK instead
    second = _child(loop, "sleep 600")
    try:
        for _ in range(600):  # the loop sets it while it takes the conversation over
            if second.pidfd is not None or second.done.is_set():
                break
            time.sleep(0.1)
        assert second.pidfd is not None  # pidfds are still used for the others
    finally:
        second.abort()
        _end(second)
