"""Issue 28: fleet-audit's progress line fits the terminal it is drawn on."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import termios

import pytest

from bsdcrypt.fleet.progress import Progress, progress_line


@pytest.mark.parametrize("columns", [200, 80, 60, 40, 30, 20, 8, 1])
def test_the_line_leaves_the_last_column_free(columns: int) -> None:
    for done, total, failed, elapsed in ((0, 5, 0, 0.0), (12, 500, 3, 41.2), (99_999, 100_000, 12_345, 86_399.0)):
        line = progress_line(done, total, failed, elapsed, columns)
        assert len(line) <= max(columns - 1, 1), (columns, line)
        assert columns < 20 or line.startswith(("[", f"{done}/"))


def test_a_wide_terminal_gets_the_whole_line() -> None:
    line = progress_line(250, 500, 2, 10.0, 120)
    assert line == "[############............] 250/500 done, 2 failed, 10s elapsed, ETA 10s"
    assert progress_line(250, 500, 2, 10.0, 40) == "250/500 done, 2 failed, ETA 10s"


def test_progress_reads_the_width_of_its_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 40, 0, 0))
        with os.fdopen(slave, "w", closefd=False) as stream:
            p = Progress(500, stream, enabled=True)
            p.update(12, 3, force=True)
            p.update(500, 3, force=True)
            p.finish()
        chunks = []
        while select.select([master], [], [], 5.0)[0]:  # everything drawn is already in the pty: a bounded read
            chunks.append(os.read(master, 65536))
            if b"500/500" in b"".join(chunks) and b"".join(chunks).endswith(b"\r"):
                break
        drawn = b"".join(chunks).decode()
    finally:
        os.close(master)
        os.close(slave)
    pieces = [piece for piece in drawn.replace("\r\n", "\n").split("\r") if piece]
    assert pieces and all(len(piece) < 40 for piece in pieces), (os.environ.get("COLUMNS"), pieces)
    assert any("12/500" in piece for piece in pieces) and any("500/500" in piece for piece in pieces)
