"""Local file helpers for the tool's own outputs (not for editing a host)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bsdcrypt.errors import BsdcryptError


def atomic_write_text(path: str | os.PathLike[str], text: str, mode: int | None = None) -> None:
    """Write text to path via a temp file in the same directory and a rename.

    The file is private (0600, from mkstemp) unless `mode` is given, e.g. 0o644 for a Prometheus
    textfile that node_exporter, running as another user, must read.
    """
    target = Path(path)
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
