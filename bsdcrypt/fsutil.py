"""Where a report goes: the one mechanism every `-o FILE` and standard output use (docs/output.md).

* A regular file, or a path that does not exist yet, is written atomically: a temp file in the same
  directory, fsync, rename. A symlink is written through (the link stays).
* Anything else that exists (a character or block device such as /dev/null, a FIFO, a socket) is
  written in place, never replaced, never renamed over.
* `-o` naming one of the command's own inputs (same device and inode) is refused up front.
* A report that cannot be delivered (a full disk, an I/O error, a closed pipe) is an OutputError:
  one line and an exit status of its own (EXIT_OUTPUT 74, EXIT_PIPE 141), never 1 (= warning).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bsdcrypt.errors import BsdcryptError

EXIT_OUTPUT = 74  # sysexits(3) EX_IOERR: the report could not be written (full disk, I/O error)
EXIT_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe


class OutputError(BsdcryptError):
    """The report could not be delivered; exit_code tells a closed pipe from a failed write."""

    def __init__(self, message: str, exit_code: int = EXIT_OUTPUT) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _failure(where: str, exc: OSError) -> OutputError:
    if isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE:
        return OutputError(f"cannot write the report to {where}: the reader closed the pipe", EXIT_PIPE)
    return OutputError(f"cannot write the report to {where}: {exc.strerror or exc}")


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _stdin_identity() -> tuple[int, int] | None:
    try:
        st = os.fstat(0)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def check_output_path(output: str, inputs: Iterable[str] = ()) -> None:
    """-o FILE must be writable before the work that fills it is done (a fleet audit, a bench), and
    must not be one of the command's inputs (`-` in inputs is standard input). BsdcryptError (one
    line) otherwise. A device, FIFO or socket that exists passes: it is written in place."""
    if output == "":
        raise BsdcryptError("-o/--output is empty: name a file, or - for standard output")
    target = os.path.realpath(output)  # the report is written through a symlink
    folder = os.path.dirname(target) or "."
    if os.path.isdir(target):
        raise BsdcryptError(f"cannot write the report to {output}: it is a folder")
    if _descriptor(output) is not None:
        return  # an open descriptor (/dev/stdout, /dev/fd/N): written as it is, like standard output
    mine = _identity(output)  # os.stat follows every link
    if mine is not None:
        for path in inputs:
            theirs = _stdin_identity() if path == "-" else _identity(path)
            if theirs == mine:
                what = "standard input" if path == "-" else path
                raise BsdcryptError(f"refusing to write the report to {output}: it is {what}, an input of this command")
    if mine is not None and _is_special(output):
        return  # a device, FIFO or socket: opened in place when the report is written
    if not os.path.isdir(folder):
        raise BsdcryptError(f"cannot write the report to {output}: there is no folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BsdcryptError(f"cannot write the report to {output}: folder {folder} is not writable")


def _is_special(path: str) -> bool:
    """An existing path that is not a regular file (after following links)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


READER_WAIT = 1.0  # seconds a FIFO may take to get its reader (`bsdcrypt ... -o f & cat f`) before exit 74


def _open_in_place(target: str, shown: str) -> int:
    """Open a device or FIFO for writing without blocking: a FIFO nobody reads gives ENXIO at once (a
    blocking open would wait forever); it is tried again for READER_WAIT seconds, then it is one line and
    exit 74. Once open, the descriptor blocks again, so a slow reader is waited for, not an error."""
    import time

    deadline = time.monotonic() + READER_WAIT
    while True:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise _failure(shown, exc) from exc
            if time.monotonic() >= deadline:  # a socket, or a FIFO nobody reads: nothing to write to
                raise OutputError(f"cannot write the report to {shown}: nothing is reading it") from exc
            time.sleep(0.05)
    try:
        os.set_blocking(fd, True)
    except OSError as exc:
        os.close(fd)
        raise _failure(shown, exc) from exc
    return fd


def _write_in_place(target: str, data: bytes, shown: str) -> None:
    """A device, FIFO or socket: open it as it is (no create, no truncate of anything else) and write."""
    fd = _open_in_place(target, shown)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError as exc:
        raise _failure(shown, exc) from exc
    finally:
        os.close(fd)


_DESCRIPTORS = {"/dev/stdout": 1, "/dev/stderr": 2}


def _descriptor(path: str) -> int | None:
    """The open descriptor a path names (/dev/stdout, /dev/fd/N, /proc/self/fd/N), else None. Such a
    path means "this descriptor": written to as it is, never opened anew (which would start at offset 0
    of a shell's `>>` file) and never renamed over (which would replace the file a shell opened)."""
    if path in _DESCRIPTORS:
        return _DESCRIPTORS[path]
    for prefix in ("/dev/fd/", "/proc/self/fd/"):
        if path.startswith(prefix) and path[len(prefix):].isdigit():
            return int(path[len(prefix):])
    return None


def _write_descriptor(fd: int, data: bytes, shown: str) -> None:
    if fd == 1:
        sys.stdout.flush()  # what was printed before comes first
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise _failure(shown, exc) from exc


def write_file(path: str | os.PathLike[str], text: str, mode: int | None = None) -> None:
    """Write a report to path: atomically for a regular file or a new path, in place otherwise.

    An existing file keeps its mode; a new one gets `mode`, or stays private (0600, from mkstemp).
    Reports pass 0o644: a Prometheus textfile must be readable by node_exporter, another user.
    """
    shown = os.fspath(path)
    if shown == "":
        raise BsdcryptError("-o/--output is empty: name a file, or - for standard output")
    data = text.encode("utf-8")
    fd = _descriptor(shown)
    if fd is not None:
        _write_descriptor(fd, data, shown)
        return
    if _is_special(shown):
        _write_in_place(shown, data, shown)
        return
    target = Path(os.path.realpath(path))  # write through a symlink, do not replace the link
    try:
        mode = target.stat().st_mode & 0o7777
    except OSError:
        pass
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    except OSError as exc:
        raise BsdcryptError(f"cannot write {target}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        if _is_special(str(target)):  # became a device or FIFO meanwhile: still never renamed over
            Path(tmp).unlink(missing_ok=True)
            _write_in_place(shown, data, shown)
            return
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _failure(str(target), exc) from exc


# The old name: every -o goes through write_file.
atomic_write_text = write_file


MIB = 1 << 20
_READ_CHUNK = 1 << 16


class InputError(BsdcryptError):
    """An input file that cannot be read as one (one line naming it). `missing`: the path does not
    exist (an ssh `Include` skips such a match, as ssh does)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def _kind(mode: int) -> str | None:
    """What a path that is not a regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe), not a regular file"
    if stat.S_ISCHR(mode):
        return "a character device, not a regular file"
    if stat.S_ISBLK(mode):
        return "a block device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a regular file"
    return "not a regular file"


def _read_fd(fd: int, limit: int) -> bytes:
    """At most limit + 1 bytes from fd (one more than allowed tells "too large" from "just fits")."""
    chunks: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, _READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_input(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """THE reader of every input file bsdcrypt is handed (recordings, pastes, hosts files, bench records,
    ssh files...): its bytes, at most `limit` of them, or InputError (one line naming the file).

    * `-` is standard input, and a descriptor path (/dev/stdin, /dev/fd/N, /proc/self/fd/N: a shell's
      `<(cmd)`) is that open descriptor: streams the user opened, read up to the limit.
    * Any other path must be a regular file, checked before it is opened (a device, FIFO or socket is one
      line naming it: /dev/zero never ends, a FIFO nobody writes never answers). It is opened with
      O_NONBLOCK, so a FIFO swapped in after the check cannot block the open, and fstat'ed again once
      open: what is read is what was checked.
    * The size is checked before anything is read (a 75 MB file is refused without reading it), and the
      read stops at limit + 1 bytes (a file that grows meanwhile, /proc files that show size 0).
    Nothing is parsed here: callers parse only what passed the cap.
    """
    shown = os.fspath(path)
    name = "standard input" if shown == "-" else shown
    if shown == "":
        raise InputError(f"the {what} path is empty: name a file, or - for standard input")
    if shown == "-":
        return _read_stdin(limit, what)
    fd = 0 if shown == "/dev/stdin" else _descriptor(shown) if shown.startswith(("/dev/fd/", "/proc/")) else None
    if fd is not None:
        return _read_stream(fd, limit, what, name)
    try:
        st = os.stat(shown)
    except FileNotFoundError as exc:
        raise InputError(f"cannot read {what} {name}: {exc.strerror}", missing=True) from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {what} {name}: {_why(exc)}") from exc
    kind = _kind(st.st_mode)
    if kind is not None:
        raise InputError(f"cannot read {what} {name}: it is {kind}")
    try:
        fd = os.open(shown, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise InputError(f"cannot read {what} {name}: {exc.strerror}", missing=True) from exc
    except OSError as exc:
        raise InputError(f"cannot read {what} {name}: {_why(exc)}") from exc
    try:
        st = os.fstat(fd)
        kind = _kind(st.st_mode)
        if kind is not None:  # swapped for another kind of file since the check
            raise InputError(f"cannot read {what} {name}: it is {kind}")
        if st.st_size > limit:
            raise InputError(f"{what} {name} is larger than {_size(limit)}: not something bsdcrypt reads")
        data = _read_fd(fd, limit)
    except OSError as exc:
        raise InputError(f"cannot read {what} {name}: {_why(exc)}") from exc
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError(f"{what} {name} is larger than {_size(limit)}: not something bsdcrypt reads")
    return data


def _read_stream(fd: int, limit: int, what: str, name: str) -> bytes:
    """A descriptor the user opened (/dev/fd/N): a regular file's size is checked first."""
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"cannot read {what} {name}: it is a folder")
        if stat.S_ISREG(st.st_mode) and st.st_size - _offset(fd) > limit:
            raise InputError(f"{what} {name} is larger than {_size(limit)}: not something bsdcrypt reads")
        data = _read_fd(fd, limit)
    except OSError as exc:
        raise InputError(f"cannot read {what} {name}: {_why(exc)}") from exc
    if len(data) > limit:
        raise InputError(f"{what} {name} is larger than {_size(limit)}: not something bsdcrypt reads")
    return data


def _read_stdin(limit: int, what: str) -> bytes:
    """Standard input (through sys.stdin, which tests and embedders may replace)."""
    try:
        stream = sys.stdin.buffer
        try:
            st = os.fstat(stream.fileno())
        except (OSError, ValueError, AttributeError):
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise InputError(f"cannot read {what} standard input: it is a folder")
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_size - _offset(stream.fileno()) > limit:
            raise InputError(f"{what} standard input is larger than {_size(limit)}: not something bsdcrypt reads")
        data = stream.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read {what} standard input: {_why(exc)}") from exc
    if len(data) > limit:
        raise InputError(f"{what} standard input is larger than {_size(limit)}: not something bsdcrypt reads")
    return bytes(data)


def _offset(fd: int) -> int:
    try:
        return os.lseek(fd, 0, os.SEEK_CUR)
    except OSError:
        return 0


def _why(exc: BaseException) -> str:
    if isinstance(exc, IsADirectoryError):
        return "it is a folder"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n >= MIB and n % MIB == 0 else f"{n} bytes"


class GuardedStdout:
    """sys.stdout for the run of a command: a failed write or flush (full disk, closed pipe) raises
    OutputError instead of an OSError that click would turn into exit 1 (= warning) or a traceback.
    Everything else is the wrapped stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError as exc:
            raise _failure("standard output", exc) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _failure("standard output", exc) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def give_up_stdout() -> None:
    """After stdout failed: point fd 1 at /dev/null so the interpreter's last flush cannot fail again
    (it would print "Exception ignored" and exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
