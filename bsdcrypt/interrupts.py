"""Ctrl-C and SIGTERM: one exception and the scopes that decide what SIGTERM does.

SIGTERM is turned into `Interrupted("SIGTERM")`, a KeyboardInterrupt, so the paths that close hosts,
roll back writes and clean up a bench on Ctrl-C run for it too. Commands that report an interrupt
with more detail (fleet-audit, bench, enable) raise subclasses carrying it. Signal handlers can only
be set in the main thread: elsewhere every scope here is a no-op.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM while a command runs."""

    def __init__(self, signame: str = "SIGINT", message: str | None = None) -> None:
        super().__init__(signame if message is None else message)
        self.signame = signame

    @property
    def exit_code(self) -> int:
        """128 + the signal number, as a shell reports a command killed by it: 130 (SIGINT), 143 (SIGTERM)."""
        return 128 + int(signal.Signals[self.signame])


def signame_of(exc: BaseException) -> str:
    """SIGTERM for an Interrupted("SIGTERM"), SIGINT for any other KeyboardInterrupt (Ctrl-C)."""
    return exc.signame if isinstance(exc, Interrupted) else "SIGINT"


def reason_of(exc: BaseException) -> str:
    """How messages name the interrupt: "SIGTERM", or "Ctrl-C" for SIGINT."""
    return "SIGTERM" if signame_of(exc) == "SIGTERM" else "Ctrl-C"


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def sigterm_raises() -> Iterator[list[int]]:
    """While inside, SIGTERM raises Interrupted("SIGTERM") like Ctrl-C raises KeyboardInterrupt; the
    list yielded records each SIGTERM received. The previous handler comes back after."""
    got: list[int] = []
    if not _main_thread():
        yield got
        return

    def _handler(signum: int, frame: FrameType | None) -> None:
        got.append(signum)
        raise Interrupted("SIGTERM")

    old = signal.signal(signal.SIGTERM, _handler)
    try:
        yield got
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """During cleanup, Ctrl-C/SIGTERM are recorded, not raised, so cleanup is not cut short."""
    got: list[int] = []
    if not _main_thread():
        yield got
        return

    def _record(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    old_int = signal.signal(signal.SIGINT, _record)
    old_term = signal.signal(signal.SIGTERM, _record)
    try:
        yield got
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


@contextmanager
def signals_ignored() -> Iterator[None]:
    """While a bounded cleanup runs, a second Ctrl-C or SIGTERM is ignored rather than cutting it short."""
    if not _main_thread():
        yield
        return
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
