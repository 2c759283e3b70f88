"""Local file helpers for the tool's own outputs (not for editing a host)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bsdcrypt.errors import BsdcryptError


def atomic_write_text(path: str | os.PathLike[str], text: str, mode: int | None = None) -> None:
    """Write text to path via a temp file in the same directory and a rename.

    An existing file keeps its mode; a new one gets `mode`, or stays private (0600, from mkstemp).
    Reports pass 0o644: a Prometheus textfile must be readable by node_exporter, another user.
    """
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
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise BsdcryptError(f"cannot write {target}: {exc.strerror}") from exc


def check_output_path(output: str) -> None:
    """-o FILE must be writable before the work that fills it is done (a fleet audit, a bench): its
    folder exists and can take a new file. BsdcryptError (one line) otherwise."""
    target = os.path.realpath(output)  # the report is written through a symlink
    folder = os.path.dirname(target) or "."
    if os.path.isdir(target):
        raise BsdcryptError(f"cannot write the report to {output}: it is a folder")
    if not os.path.isdir(folder):
        raise BsdcryptError(f"cannot write the report to {output}: there is no folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BsdcryptError(f"cannot write the report to {output}: folder {folder} is not writable")
