"""Local file helpers for the tool's own outputs (not for editing a host)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bsdcrypt.errors import BsdcryptError


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write text to path via a temp file in the same directory and a rename."""
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
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise BsdcryptError(f"cannot write {target}: {exc.strerror}") from exc
