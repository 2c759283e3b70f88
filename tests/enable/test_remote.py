"""Reading a host for enable (enable/remote.py): the system at --root DIR, and links that would lead out
of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bsdcrypt.enable.act import safe_write
from bsdcrypt.enable.remote import read_loader_files
from bsdcrypt.errors import ActError
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.loader.conf import set_yes

from .conftest import write


def test_root_never_follows_a_link_out_of_the_root(root: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("host") / "hostname"
    write(outside, b"the host's own file\n")
    link = root / "boot" / "loader.conf.local"
    link.symlink_to(os.path.relpath(outside, link.parent))  # relative, but climbs out of the root
    with pytest.raises(ActError, match="outside"):
        read_loader_files(LocalHost(), str(root))
    write(root / "boot" / "loader.conf", b"a=1\n")
    (edit,) = set_yes([(str(root / "boot" / "loader.conf"), b"a=1\n")], root=str(root))
    link.unlink()
    (root / "boot" / "loader.conf").unlink()
    (root / "boot" / "loader.conf").symlink_to(outside)  # absolute: taken inside the root, which lacks it
    with pytest.raises(ActError):
        safe_write(LocalHost(), edit, root=str(root))
    assert outside.read_bytes() == b"the host's own file\n"
    assert not list(outside.parent.glob("*.bsdcrypt-*"))


def test_read_root_system_without_version_files(root: Path) -> None:
    assert read_root_system_of(root) == (None, None, None)  # no freebsd-version, no kernel, no product


def read_root_system_of(root: Path) -> tuple[str | None, str | None, str | None]:
    from bsdcrypt.enable.remote import read_root_system

    s = read_root_system(LocalHost(), str(root))
    return s.release, s.arch, s.variant
