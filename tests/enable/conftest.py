"""Shared by the tests of bsdcrypt.enable: a temporary --root with boot/loader.conf.d, and file helpers."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "boot" / "loader.conf.d").mkdir(parents=True)
    return tmp_path


def write(p: Path, data: bytes, mode: int = 0o644) -> None:
    p.write_bytes(data)
    p.chmod(mode)


def backups(d: Path) -> list[Path]:
    return sorted(d.glob("*.bsdcrypt-*"))
