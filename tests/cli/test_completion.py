"""Shell completion in a real interactive bash (in a pty): what readline puts on the command line.

The env-var protocol tests (tests/cli/test_app.py) check the values; this checks what bash does
with them: `replay:` splits words at the colon (COMP_WORDBREAKS), a directory takes no space.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash not installed")


def _read_until(fd: int, wanted: bytes, timeout: float) -> bytes:
    out = b""
    end = time.monotonic() + timeout
    while wanted not in out and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out


@pytest.fixture(scope="module")
def completion_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bashcomp")
    # a `bsdcrypt` on PATH that is this checkout
    exe = folder / "bin" / "bsdcrypt"
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'from bsdcrypt.cli import main; main()' \"$@\"\n")
    exe.chmod(0o755)
    r = subprocess.run([str(BASH), "-c", f"{exe} --show-completion; exit $?"], capture_output=True, text=True,
                       timeout=60, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    script = folder / "bsdcrypt.bash"
    script.write_text(r.stdout)
    return script


@pytest.mark.slow
@pytest.mark.parametrize(
    ("typed", "line"),
    [
        ("status --host replay:freebsd-13.0-hy", b"status --host replay:freebsd-13.0-hyperv-builtin "),
        ("status --host replay:fixt", b"status --host replay:fixtures/"),  # no space after a directory
        ("status --host replay:fixtures/hosts/freebsd-13.0-hy",
         b"status --host replay:fixtures/hosts/freebsd-13.0-hyperv-builtin.yaml "),
        ("status -f nag", b"status -f nagios "),
        ("status -f ht", b"status -f html "),
        ("fleet-audit hosts.txt --format=ht", b"fleet-audit hosts.txt --format=html "),
    ],
)
def test_bash_completes_on_the_command_line(completion_script: Path, typed: str, line: bytes) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 400, 0, 0))  # no line wrapping
    env = {**os.environ, "PS1": "READY$ ", "TERM": "dumb", "INPUTRC": "/dev/null", "PYTHONPATH": str(ROOT),
           "PATH": f"{completion_script.parent / 'bin'}:{os.environ['PATH']}", "HOME": str(completion_script.parent)}
    proc = subprocess.Popen([str(BASH), "--norc", "--noprofile", "-i"], stdin=slave, stdout=slave, stderr=slave,
                            env=env, cwd=ROOT, start_new_session=True)
    os.close(slave)
    try:
        os.write(master, f"source {completion_script}; echo SOURCED\n".encode())
        assert b"SOURCED" in _read_until(master, b"SOURCED\r\nREADY$ ", 20)
        os.write(master, f"bsdcrypt {typed}\t".encode())
        out = _read_until(master, line, 30)
        assert line in out, out
        if line.endswith(b"/"):  # the cursor stays right after the slash: no space was added
            out += _read_until(master, line + b" ", 1)
            assert line + b" " not in out, out
    finally:
        os.write(master, b"\x15exit\n")
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        os.close(master)
