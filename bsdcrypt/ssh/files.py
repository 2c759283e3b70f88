"""Reading the user's ssh files (config, Include, known_hosts): regular files only, bounded.

A FIFO, a device or a socket where a config or known_hosts file should be would block the read (or
never end): it is one line naming it, before anything is opened for reading. This is the one place
bsdcrypt.ssh reads a file, so it can follow the project's one bounded reader (bsdcrypt.fsutil).
"""

from __future__ import annotations

import os
import stat

from bsdcrypt.ssh.errors import SSHError


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _is_devnull(info: os.stat_result) -> bool:
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == null.st_rdev


def read_regular(path: str, limit: int, what: str, missing_ok: bool = True) -> bytes | None:
    """The bytes of `path`, at most `limit`; None when it does not exist and `missing_ok`.

    SSHError (kind config) for anything that is not a regular file, a file over `limit` bytes, or a
    read error: one line naming the file. The check is made on the opened descriptor (O_NONBLOCK, so
    opening a FIFO cannot block), so a file swapped after a stat() cannot slip through."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        if missing_ok:
            return None
        raise SSHError("config", f"cannot read {what} {path}: {exc.strerror}") from exc
    except OSError as exc:
        raise SSHError("config", f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if _is_devnull(info):  # `UserKnownHostsFile /dev/null`: empty, as ssh reads it
            return b""
        if not stat.S_ISREG(info.st_mode):
            raise SSHError("config", f"{what} {path} is {_kind(info.st_mode)}, not a file: not read")
        if info.st_size > limit:
            raise SSHError("config", f"{what} {path} is larger than {limit >> 20} MiB: not read")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise SSHError("config", f"{what} {path} is larger than {limit >> 20} MiB: not read")
        return b"".join(chunks)
    except OSError as exc:
        raise SSHError("config", f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def check_regular(path: str, what: str) -> None:
    """For files another program reads (the system ssh): SSHError if `path` exists and is not a
    regular file (a FIFO there would hang that program)."""
    try:
        info = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(info.st_mode) and not _is_devnull(info):
        raise SSHError("config", f"{what} {path} is {_kind(info.st_mode)}, not a file: not read")
