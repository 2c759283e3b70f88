"""Issue 26: `-o FIFO` with no reader is exit 74 and one line (docs/output.md), never a process blocked
forever in open(2): the output is opened with O_NONBLOCK (ENXIO at once), then blocks again for writing."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from conftest import run_cli

from bsdcrypt import fsutil
from bsdcrypt.fsutil import EXIT_OUTPUT, OutputError, write_file

ROOT = Path(__file__).resolve().parent.parent
REPLAY = "replay:freebsd-13.0-hyperv-builtin"


@pytest.mark.slow
@pytest.mark.parametrize("command", [["status", "-H", REPLAY], ["record", "-H", REPLAY], ["fleet-audit", "{hosts}"],
                                     ["analyze", "{rec}"]])
def test_a_fifo_nobody_reads_is_exit_74_and_one_line(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{REPLAY}\n")
    rec = ROOT / "fixtures" / "hosts" / "freebsd-13.0-hyperv-builtin.yaml"
    args = [a.replace("{hosts}", str(hosts)).replace("{rec}", str(rec)) for a in command]
    r = run_cli(*args, "-o", str(fifo), timeout=300)  # a blocking open would hang here, not fail
    assert r.returncode == EXIT_OUTPUT, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and f"cannot write the report to {fifo}: nothing is reading it" in r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_reader_that_comes_late_is_waited_for_briefly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsutil, "READER_WAIT", 60.0)
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def late_reader() -> None:
        time.sleep(0.3)
        got.append(fifo.read_bytes())

    t = threading.Thread(target=late_reader, daemon=True)
    t.start()
    write_file(fifo, "report\n")
    t.join(60)
    assert got == [b"report\n"]


def test_the_descriptor_blocks_again_once_open(tmp_path: Path) -> None:
    """A slow reader is waited for: after the non-blocking open the writes block (no EAGAIN on a full pipe)."""
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    got: list[int] = []

    def slow_reader() -> None:
        with open(fifo, "rb") as fh:
            time.sleep(0.5)  # the pipe (64 KiB) fills meanwhile
            got.append(len(fh.read()))

    t = threading.Thread(target=slow_reader, daemon=True)
    t.start()
    write_file(fifo, "x" * (1 << 20))
    t.join(60)
    assert got == [1 << 20]


def test_no_reader_raises_output_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsutil, "READER_WAIT", 0.0)
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="nothing is reading it") as exc:
        write_file(fifo, "x")
    assert exc.value.exit_code == EXIT_OUTPUT
