"""Issue 11 part 1: `-o` never destroys what it points at (bsdcrypt.fsutil, the one output mechanism).

Devices are made in tmp_path (mknod, as root) so a regression replaces a test's node, never /dev/null.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bsdcrypt.errors import BsdcryptError
from bsdcrypt.fsutil import EXIT_OUTPUT, EXIT_PIPE, check_output_path, write_file

ROOT = Path(__file__).resolve().parent.parent
REC = "freebsd-13.0-hyperv-builtin"
SHIPPED = ROOT / "fixtures" / "hosts" / f"{REC}.yaml"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a device needs root")


run = run_cli


def _device(path: Path, minor: int) -> Path:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))  # 1,3 is null(4); 1,7 is full(4)
    return path


def _hosts(tmp_path: Path) -> Path:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"replay:{REC}\n")
    return hosts


# Every command with -o, as (args before -o): the report each writes.
COMMANDS = {
    "status": lambda tmp: ["status", "-H", f"replay:{REC}", "-f", "prometheus"],
    "fleet-audit": lambda tmp: ["fleet-audit", str(_hosts(tmp)), "-q", "-f", "csv"],
    "analyze": lambda tmp: ["analyze", str(SHIPPED), "-f", "json"],
    "record": lambda tmp: ["record", "-H", f"replay:{REC}"],
}


@root_only
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_null_device_stays_a_device(tmp_path: Path, command: str) -> None:
    null = _device(tmp_path / "null", 3)
    before = os.stat(null)
    r = run(*COMMANDS[command](tmp_path), "-o", str(null))
    assert r.returncode in (0, 3), r.stderr  # status/fleet exit with the verdict; record/analyze 0
    after = os.stat(null)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino and after.st_rdev == before.st_rdev
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp file left


@pytest.mark.slow
def test_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    r = run(*COMMANDS["status"](tmp_path), "-o", str(fifo))
    reader.join(timeout=120)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert b"bsdcrypt_exit_code" in got[0]


@pytest.mark.slow
def test_a_socket_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    try:
        r = run(*COMMANDS["status"](tmp_path), "-o", str(path))
        assert r.returncode == EXIT_OUTPUT and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
        assert stat.S_ISSOCK(os.stat(path).st_mode)
    finally:
        sock.close()


@given(kind=st.sampled_from(["regular", "missing", "fifo", "symlink-to-regular", "dangling-symlink"]),
       text=st.text(max_size=200))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_write_file_keeps_what_is_not_a_regular_file(tmp_path: Path, kind: str, text: str) -> None:
    """Property: after write_file, a regular (or new) path holds exactly the text; a link is still a
    link; a FIFO is still the same FIFO (read by a thread here)."""
    folder = tmp_path / kind
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    path = folder / "out"
    if kind == "regular":
        path.write_text("old")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink-to-regular":
        (folder / "real").write_text("old")
        path.symlink_to("real")
    elif kind == "dangling-symlink":
        path.symlink_to("made")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(path.read_bytes()), daemon=True) if kind == "fifo" else None
    if reader:
        reader.start()
    before = os.stat(path) if kind == "fifo" else None
    write_file(path, text)
    if reader:
        reader.join(timeout=60)
        assert got == [text.encode()]
        assert before is not None and os.stat(path).st_ino == before.st_ino and stat.S_ISFIFO(os.stat(path).st_mode)
    else:
        assert path.read_bytes() == text.encode("utf-8")
    if kind.endswith("symlink"):
        assert path.is_symlink()
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


@pytest.mark.slow
@pytest.mark.parametrize("command", ["status", "record", "fleet-audit", "analyze"])
def test_an_input_named_as_output_is_refused(tmp_path: Path, command: str) -> None:
    rec = tmp_path / "host.yaml"
    shutil.copy(SHIPPED, rec)
    original = rec.read_bytes()
    link = tmp_path / "other-name.yaml"
    os.link(rec, link)  # the same file under another name: compared by device and inode
    args = {
        "status": ["status", "-H", f"replay:{rec}"],
        "record": ["record", "-H", f"replay:{rec}"],
        "analyze": ["analyze", str(rec)],
        "fleet-audit": ["fleet-audit", str(tmp_path / "hosts"), "-q"],
    }[command]
    (tmp_path / "hosts").write_text(f"replay:{rec}\n")
    for target in (rec, link):
        r = run(*args, "-o", str(target))
        assert r.returncode == 3, r.stderr
        assert r.stderr.startswith("bsdcrypt: refusing to write the report to") and r.stderr.count("\n") == 1
        assert rec.read_bytes() == original
    if command == "fleet-audit":
        hosts = tmp_path / "hosts"
        r = run(*args, "-o", str(hosts))
        assert r.returncode == 3 and "an input of this command" in r.stderr
        assert hosts.read_text() == f"replay:{rec}\n"


def test_standard_input_named_as_output_is_refused(tmp_path: Path) -> None:
    rec = tmp_path / "host.yaml"
    shutil.copy(SHIPPED, rec)
    with open(rec, "rb") as stdin:
        r = run("analyze", "-", "-o", str(rec), stdin=stdin)
    assert r.returncode == 3 and "standard input" in r.stderr
    assert rec.read_bytes() == SHIPPED.read_bytes()


def test_check_output_path_compares_inodes_not_names(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.write_text("x")
    (tmp_path / "sub").mkdir()
    check_output_path(str(tmp_path / "b"), [str(a)])
    with pytest.raises(BsdcryptError, match="an input of this command"):
        check_output_path(str(tmp_path / "sub" / ".." / "a"), [str(a)])
    (tmp_path / "l").symlink_to(a)
    with pytest.raises(BsdcryptError, match="an input of this command"):
        check_output_path(str(tmp_path / "l"), [str(a)])


@pytest.mark.slow
def test_a_full_disk_on_stdout_is_one_line_and_its_own_exit_status() -> None:
    with open("/dev/full", "w") as full:  # writing to full(4) only fails: nothing is changed
        r = run("status", "-H", f"replay:{REC}", "-f", "json", stdout=full)
    assert r.returncode == EXIT_OUTPUT
    assert r.stderr == "bsdcrypt: cannot write the report to standard output: No space left on device\n"


@root_only
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_full_disk_on_o_is_one_line_and_its_own_exit_status(tmp_path: Path, command: str) -> None:
    full = _device(tmp_path / "full", 7)
    r = run(*COMMANDS[command](tmp_path), "-o", str(full))
    assert r.returncode == EXIT_OUTPUT, r.stderr
    assert r.stderr.endswith("No space left on device\n") and r.stderr.count("\n") == 1
    assert stat.S_ISCHR(os.stat(full).st_mode)


@pytest.mark.parametrize(
    "args",
    [
        ["status", "-H", f"replay:{REC}", "-f", "json"],
        ["probe-script"],
        ["recordings"],
        ["enable", "-n", "-H", f"replay:{REC}"],
        ["analyze", str(SHIPPED)],
    ],
)
def test_a_closed_pipe_is_one_line_and_exit_141(args: list[str]) -> None:
    """The reader is gone before the first write (its end closed before the start): every write fails
    with EPIPE. Never exit 1, which reads as a warning."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "bsdcrypt", *args], stdout=write_end, stderr=subprocess.PIPE, text=True,
            cwd=ROOT, check=False, timeout=120,
        )
    finally:
        os.close(write_end)
    assert r.returncode == EXIT_PIPE, r.stderr
    assert r.stderr == "bsdcrypt: cannot write the report to standard output: the reader closed the pipe\n"


@pytest.mark.slow
def test_a_folder_or_missing_folder_is_refused_before_the_work(tmp_path: Path) -> None:
    r = run("fleet-audit", str(_hosts(tmp_path)), "-q", "-o", str(tmp_path))
    assert r.returncode == 3 and "it is a folder" in r.stderr
    r = run("status", "-H", f"replay:{REC}", "-o", str(tmp_path / "nope" / "x.prom"))
    assert r.returncode == 3 and "there is no folder" in r.stderr


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_dev_stdout_is_the_descriptor_not_a_file_to_replace(tmp_path: Path, name: str) -> None:
    """`>> log` and `-o /dev/stdout`: the report is appended to what the shell opened; the file the
    shell redirected to is neither renamed over nor rewritten from its start."""
    if not os.path.exists(name):
        pytest.skip(f"no {name} here")
    log = tmp_path / "log"
    log.write_text("earlier line\n")
    before = os.stat(log).st_ino
    with open(log, "a") as out:
        r = run("status", "-H", f"replay:{REC}", "-f", "nagios", "-o", name, stdout=out)
    assert r.returncode == 0, r.stderr
    text = log.read_text()
    assert text.startswith("earlier line\nBSDCRYPT OK: ") and text.count("\n") == 2
    assert os.stat(log).st_ino == before


def test_a_usage_error_nagios_line_on_a_full_disk_is_still_one_error_per_problem() -> None:
    with open("/dev/full", "w") as full:
        r = run("status", "-f", "nagios", "--timeout", "abc", stdout=full)
    assert r.returncode == EXIT_OUTPUT and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[-1] == "bsdcrypt: cannot write the report to standard output: No space left on device"
