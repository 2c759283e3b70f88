"""`enable --root DIR` end to end: the flow decides from the system at DIR (its release, kernel, product)
and refuses what it must, through the CLI on a temporary tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from freebsd_tree import add_kernel

from bsdcrypt.enable.remote import read_loader_files
from bsdcrypt.errors import ActError
from bsdcrypt.hosts.local import LocalHost

from .conftest import backups, write


@pytest.mark.parametrize(("version", "builtin"), [("13.2-RELEASE-p4", True), ("12.4-RELEASE-p9", False), (None, False)])
def test_root_decides_from_the_release_of_the_system_at_root(root: Path, version: str | None, builtin: bool) -> None:
    """freebsd-version(1) in the image says its release; 13.0+ GENERIC has aesni compiled in: nothing to
    do (exit 0, like a running kernel with it compiled in), and --force writes the line anyway."""
    from typer.testing import CliRunner

    from bsdcrypt.cli import app, register_commands

    if version:
        (root / "bin").mkdir()
        # the line as bin/freebsd-version/freebsd-version.sh.in has it once built
        (root / "bin" / "freebsd-version").write_text(f'#!/bin/sh\nUSERLAND_VERSION="{version}"\n')
    else:
        add_kernel(root)  # no userland to tell the release, but a FreeBSD kernel: release unknown
    write(root / "boot" / "loader.conf", b'zfs_load="YES"\n')
    register_commands()
    r = CliRunner().invoke(app, ["enable", "--persist", "--yes", "--root", str(root)])
    assert r.exit_code == 0, r.output
    written = (root / "boot" / "loader.conf").read_bytes()
    assert (b"aesni_load" in written) is not builtin
    if builtin:
        assert "--force" in r.output and "13.2-RELEASE-p4" in r.output
        assert "GENERIC has aesni compiled in" in r.output and "nothing to change" in r.output
        assert written == b'zfs_load="YES"\n' and not backups(root / "boot")
        r = CliRunner().invoke(app, ["enable", "--persist", "--yes", "--force", "--root", str(root)])
        assert r.exit_code == 0 and b'aesni_load="YES"' in (root / "boot" / "loader.conf").read_bytes()


def test_root_before_13_writes_loader_conf_not_loader_conf_d(root: Path) -> None:
    from typer.testing import CliRunner

    from bsdcrypt.cli import app, register_commands

    (root / "bin").mkdir()
    (root / "bin" / "freebsd-version").write_text('#!/bin/sh\nUSERLAND_VERSION="12.4-RELEASE-p9"\n')
    write(root / "boot" / "loader.conf", b'zfs_load="YES"\n')
    write(root / "boot" / "loader.conf.d" / "aesni.conf", b'aesni_load="YES"\n')  # 12.x never reads it
    register_commands()
    r = CliRunner().invoke(app, ["enable", "--persist", "--yes", "--root", str(root)])
    assert r.exit_code == 0, r.output
    assert (root / "boot" / "loader.conf").read_bytes().endswith(b'aesni_load="YES" # bsdcrypt enable: added\n')
    assert (root / "boot" / "loader.conf.d" / "aesni.conf").read_bytes() == b'aesni_load="YES"\n'


def test_root_hardenedbsd_image_needs_no_line_and_a_link_loop_is_an_error(root: Path) -> None:
    from typer.testing import CliRunner

    from bsdcrypt.cli import app, register_commands

    register_commands()
    (root / "bin").mkdir()
    (root / "bin" / "freebsd-version").write_text('#!/bin/sh\nUSERLAND_VERSION="12.1-STABLE-HBSD"\n')
    write(root / "boot" / "loader.conf", b"")
    r = CliRunner().invoke(app, ["enable", "--persist", "--yes", "--root", str(root)])
    assert r.exit_code == 0 and "HARDENEDBSD" in r.output and "nothing to change" in r.output
    assert (root / "boot" / "loader.conf").read_bytes() == b""
    (root / "boot" / "loader.conf").unlink()
    (root / "boot" / "loader.conf").symlink_to("loop1")
    (root / "boot" / "loop1").symlink_to("loader.conf")
    with pytest.raises(ActError, match="loop"):
        read_loader_files(LocalHost(), str(root))


def test_enable_refuses_a_huge_loader_conf(root: Path) -> None:
    from typer.testing import CliRunner

    from bsdcrypt.cli import app, register_commands

    register_commands()
    write(root / "boot" / "loader.conf", b"# x\n" * 300_000)
    r = CliRunner().invoke(app, ["enable", "--persist", "--yes", "--root", str(root)])
    assert r.exit_code == 3 and "loader.conf: larger than 1 MiB (1200000 bytes): not read" in r.output


def test_root_takes_the_driver_from_the_image_kernel(root: Path) -> None:
    """An arm64 image edited on an amd64 machine gets armv8crypto_load (ELF e_machine 0xb7)."""
    from typer.testing import CliRunner

    from bsdcrypt.cli import app, register_commands

    register_commands()
    (root / "bin").mkdir()
    (root / "bin" / "freebsd-version").write_text('#!/bin/sh\nUSERLAND_VERSION="12.4-RELEASE"\n')
    (root / "boot" / "kernel").mkdir()
    (root / "boot" / "kernel" / "kernel").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(11) + b"\xb7\x00" + bytes(40))
    write(root / "boot" / "loader.conf", b"")
    r = CliRunner().invoke(app, ["enable", "--persist", "--yes", "--root", str(root)])
    assert r.exit_code == 0, r.output
    assert (root / "boot" / "loader.conf").read_bytes() == b'armv8crypto_load="YES" # bsdcrypt enable: added\n'


OPNSENSE_CORE = """{
    "product_abi": "22.1",
    "product_arch": "amd64",
    "product_flavour": "OpenSSL",
    "product_id": "opnsense",
    "product_name": "OPNsense",
    "product_version": "22.1.10"
}
"""


@pytest.mark.parametrize(
    ("files", "variant", "advice"),
    [
        ({"etc/platform": "pfSense\n", "etc/version": "2.4.5-RELEASE\n"}, "pfsense", "Cryptographic & Thermal"),
        ({"usr/local/opnsense/version/core": OPNSENSE_CORE}, "opnsense", "Cryptography settings"),
        ({"usr/local/opnsense/version/opnsense": OPNSENSE_CORE}, "opnsense", "Cryptography settings"),  # < 21.x
        ({"etc/platform": "OPNsense\n"}, "opnsense", "Cryptography settings"),  # old OPNsense
        ({"etc/version": "TrueNAS-13.0-U6.1 (4fd6fc7c8f)\n"}, "truenas", "System > Tunables"),
        ({"etc/version": "FreeNAS-11.3-U5\n"}, "freenas", "System > Tunables"),
        ({}, None, ""),
    ],
    ids=["pfsense", "opnsense-core", "opnsense-old", "opnsense-platform", "truenas", "freenas", "freebsd"],
)
def test_root_appliance_is_told_by_its_own_files(root: Path, files: dict[str, str], variant: str | None, advice: str) -> None:
    """An appliance image under --root is refused with its own setting, like a running appliance."""
    from typer.testing import CliRunner

    from bsdcrypt.cli import app, register_commands
    from bsdcrypt.enable.remote import read_root_system

    (root / "bin").mkdir()
    (root / "bin" / "freebsd-version").write_text('#!/bin/sh\nUSERLAND_VERSION="12.2-RELEASE-p14"\n')
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    write(root / "boot" / "loader.conf", b'zfs_load="YES"\n')
    system = read_root_system(LocalHost(), str(root))
    assert (system.release, system.variant) == ("12.2-RELEASE-p14", variant)
    register_commands()
    r = CliRunner().invoke(app, ["enable", "--persist", "--yes", "--force", "--root", str(root)])
    if variant is None:
        assert r.exit_code == 0, r.output
        return
    assert r.exit_code == 2, r.output
    assert "generates /boot/loader.conf itself" in r.output and advice in r.output
    assert (root / "boot" / "loader.conf").read_bytes() == b'zfs_load="YES"\n' and not backups(root / "boot")
