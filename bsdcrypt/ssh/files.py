"""Reading the user's ssh files (config, Include, known_hosts, .pub): bsdcrypt's one bounded reader.

A FIFO, a device or a socket where a config or known_hosts file should be would block the read (or never
end): bsdcrypt.fsutil.read_input refuses it with one line naming it, before anything is read. Here its
InputError becomes the SSH layer's error (kind config), and `/dev/null` reads as empty, as ssh reads it
(`UserKnownHostsFile /dev/null` is common).
"""

from __future__ import annotations

import os
import stat

from bsdcrypt.fsutil import InputError, read_input
from bsdcrypt.ssh.errors import SSHError


def _is_devnull(info: os.stat_result) -> bool:
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == null.st_rdev


def read_regular(path: str, limit: int, what: str, missing_ok: bool = True) -> bytes | None:
    """The bytes of `path`, at most `limit`; None when it does not exist and `missing_ok`.

    SSHError (kind config) for anything that is not a regular file, a file over `limit` bytes, or a read
    error: one line naming the file."""
    try:
        if _is_devnull(os.stat(path)):
            return b""
    except OSError:
        pass
    try:
        # a name, never a stream: `-` in a config is a file called "-", not our standard input
        return read_input(os.path.abspath(path) if path == "-" else path, limit, what)
    except InputError as exc:
        if exc.missing and missing_ok:
            return None
        raise SSHError("config", str(exc)) from exc


def check_regular(path: str, what: str) -> None:
    """For files another program reads (the system ssh): SSHError if `path` exists and is not a regular
    file (a FIFO there would hang that program)."""
    try:
        info = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(info.st_mode) and not _is_devnull(info):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(info.st_mode) else "not a regular file"
        raise SSHError("config", f"cannot read {what} {path}: it is {kind}")
