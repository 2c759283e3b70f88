"""The progress line of fleet-audit on a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """`done/total, failed, elapsed, ETA` on one stderr line; only when stderr is a terminal.

    Redrawn when a host finishes (at most every 0.1 s) and by `tick()` every `REFRESH` seconds
    meanwhile, so that elapsed time and ETA move while slow hosts hold the count still.
    """

    REFRESH = 0.5

    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.clock = clock
        self.start = clock()
        self._last = 0.0
        self._width = 0
        self._done = self._failed = 0

    def tick(self) -> None:
        """Redraw with the same counts if the line is older than REFRESH (the fleet loop calls it often)."""
        if self.enabled and self.clock() - self._last >= self.REFRESH:
            self.update(self._done, self._failed, force=True)

    def update(self, done: int, failed: int, force: bool = False) -> None:
        if not self.enabled:
            return
        self._done, self._failed = done, failed
        now = self.clock()
        if not force and now - self._last < 0.1 and done < self.total:
            return
        self._last = now
        elapsed = now - self.start
        eta = "--" if done == 0 else f"{elapsed / done * (self.total - done):.0f}s"
        bar_w = 24
        filled = bar_w * done // max(1, self.total)
        line = (f"[{'#' * filled}{'.' * (bar_w - filled)}] {done}/{self.total} done, "
                f"{failed} failed, {elapsed:.0f}s elapsed, ETA {eta}")
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
