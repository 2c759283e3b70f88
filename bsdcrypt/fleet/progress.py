"""The progress line of fleet-audit on a terminal."""

from __future__ import annotations

import os
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
        line = progress_line(done, self.total, failed, now - self.start, self._columns())
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def _columns(self) -> int:
        """The terminal's width, read at each redraw (it may be resized): COLUMNS if set, else the terminal's."""
        columns = os.environ.get("COLUMNS", "").strip()
        if columns.isdigit() and int(columns) > 0:
            return int(columns)
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80
        except (AttributeError, OSError, ValueError):
            return 80

    def finish(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


BAR = 24  # cells of the bar when the terminal has room


def progress_line(done: int, total: int, failed: int, elapsed: float, columns: int) -> str:
    """The progress line in fewer than `columns` characters (the last column is left free: a line
    that fills it wraps on some terminals): the bar narrows, then goes, then the wording shortens."""
    eta = "--" if done == 0 else f"{elapsed / done * (total - done):.0f}s"
    room = max(columns - 1, 1)
    text = f"{done}/{total} done, {failed} failed, {elapsed:.0f}s elapsed, ETA {eta}"
    cells = min(BAR, room - len(text) - 3)
    if cells >= 8:
        filled = cells * done // max(1, total)
        return f"[{'#' * filled}{'.' * (cells - filled)}] {text}"
    for short in (text, f"{done}/{total} done, {failed} failed, ETA {eta}", f"{done}/{total}, {failed} failed"):
        if len(short) <= room:
            return short
    return f"{done}/{total}"[:room]
