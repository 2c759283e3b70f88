"""Signals while a bench runs: SIGTERM interrupts like Ctrl-C; during cleanup both wait."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from bsdcrypt.bench.model import BenchInterrupted


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While a bench runs, SIGTERM raises BenchInterrupted like Ctrl-C raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _handler(signum: int, frame: FrameType | None) -> None:
        raise BenchInterrupted("SIGTERM")

    old = signal.signal(signal.SIGTERM, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """During cleanup, Ctrl-C/SIGTERM are recorded, not raised, so cleanup is not cut short."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
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
