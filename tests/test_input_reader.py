"""Issue 26: THE one bounded reader of input files (bsdcrypt.fsutil.read_input): a regular file checked
first, a device, FIFO or socket one line naming it, opened without blocking, size capped before reading."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt import fsutil
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.fsutil import InputError, read_input

ROOT = Path(__file__).resolve().parent.parent


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and text
    return text


def test_a_regular_file_is_read_up_to_its_limit(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    assert read_input(str(f), 3, "input") == b"abc"
    assert read_input(f, 3, "input") == b"abc"  # a PathLike too
    with pytest.raises(InputError, match=rf"^input {f} is larger than 2 bytes: not something bsdcrypt reads$"):
        read_input(str(f), 2, "input")


def test_a_huge_file_is_refused_by_its_size_before_any_byte_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big"
    with open(big, "wb") as fh:
        fh.truncate(8 << 30)  # sparse: 8 GiB of size, no disk use
    calls: list[int] = []
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        calls.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(fsutil.os, "read", counting_read)
    with pytest.raises(InputError, match="is larger than 1 MiB"):
        read_input(str(big), 1 << 20, "recording")
    assert calls == []


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/dev/zero", "a character device"), ("/dev/null", "a character device"), ("/dev/urandom", "a character device")],
)
def test_a_device_is_one_line_naming_it(path: str, kind: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"no {path}")
    with pytest.raises(InputError) as exc:
        read_input(path, 1 << 20, "hosts file")
    assert one_line(exc.value) == f"cannot read hosts file {path}: it is {kind}, not a regular file"


def test_a_link_to_a_device_is_the_device(tmp_path: Path) -> None:
    link = tmp_path / "loader.conf"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputError, match="it is a character device, not a regular file$"):
        read_input(str(link), 1 << 20, "recording")


def test_a_fifo_with_no_writer_is_one_line_and_never_blocks(tmp_path: Path) -> None:
    """Run in a child with a generous deadline: a blocking open would hang, never fail."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom bsdcrypt.fsutil import read_input, InputError\n"
        "try:\n    read_input(sys.argv[1], 100, 'recording')\nexcept InputError as e:\n    print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.stdout == f"cannot read recording {fifo}: it is a FIFO (named pipe), not a regular file\n", r.stderr


def test_a_socket_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(InputError, match=r"it is a socket, not a regular file$"):
            read_input(str(path), 100, "input")


def test_a_folder_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="it is a folder$") as exc:
        read_input(str(tmp_path), 100, "input")
    assert not exc.value.missing
    with pytest.raises(InputError, match="No such file or directory$") as exc:
        read_input(str(tmp_path / "nope"), 100, "input")
    assert exc.value.missing
    with pytest.raises(InputError, match="is empty"):
        read_input("", 100, "input")


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    f = tmp_path / "f"
    f.write_text("x")
    f.chmod(0)
    with pytest.raises(InputError, match="Permission denied$"):
        read_input(str(f), 100, "input")


def test_a_file_swapped_for_a_fifo_after_the_check_is_caught_once_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check before the open sees a regular file (monkeypatched: the race), the FIFO is opened without
    blocking (O_NONBLOCK), and fstat on the open descriptor refuses it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    regular = os.stat(__file__)
    real_stat = os.stat
    monkeypatch.setattr(fsutil.os, "stat", lambda p, *a, **k: regular if str(p) == str(fifo) else real_stat(p, *a, **k))
    with pytest.raises(InputError, match="it is a FIFO"):
        read_input(str(fifo), 100, "input")


def test_a_descriptor_the_user_opened_is_read_like_standard_input() -> None:
    """`bsdcrypt analyze <(cmd)`: /dev/fd/N is a pipe the shell opened; it is read (bounded), not refused."""
    code = "import os,sys\nfrom bsdcrypt.fsutil import read_input\nsys.stdout.write(read_input(sys.argv[1], 100, 'x').decode())\n"
    r = subprocess.run(
        ["bash", "-c", f'{sys.executable} -c "$1" /dev/fd/3 3< <(printf "from a pipe")', "bash", code],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert r.stdout == "from a pipe", r.stderr
    r = subprocess.run(
        ["bash", "-c", f'{sys.executable} -c "$1" /dev/fd/3 3< /dev/zero', "bash", code],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert "x /dev/fd/3 is larger than 100 bytes" in r.stderr and r.stdout == ""


def test_standard_input_is_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big"
    with open(big, "wb") as fh:
        fh.truncate(200)
    code = "from bsdcrypt.fsutil import read_input, InputError\ntry:\n    read_input('-', 100, 'input')\nexcept InputError as e:\n    print(e)\n"
    with open(big, "rb") as fh:
        r = subprocess.run([sys.executable, "-c", code], stdin=fh, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.stdout == "input standard input is larger than 100 bytes: not something bsdcrypt reads\n"


def test_the_error_is_a_bsdcrypt_error() -> None:
    assert issubclass(InputError, BsdcryptError)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=2000), limit=st.integers(min_value=0, max_value=2100))
def test_any_bytes_read_back_exactly_or_are_too_large(tmp_path_factory: pytest.TempPathFactory, data: bytes,
                                                      limit: int) -> None:
    f = tmp_path_factory.mktemp("r") / "f"
    f.write_bytes(data)
    if len(data) <= limit:
        assert read_input(str(f), limit, "input") == data
    else:
        with pytest.raises(InputError, match="is larger than"):
            read_input(str(f), limit, "input")
