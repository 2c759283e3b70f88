"""`--root DIR` resolves every component of every path inside DIR, as chroot(DIR) would.

Real symlink trees under tmp_path. Every link that the host would follow out of DIR points at a decoy
directory outside DIR (never at this machine's /boot for anything that writes), and the decoy must be
byte-for-byte unchanged afterwards; this machine's /boot is checked unchanged around every test.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli

from bsdcrypt.enable.act import check_writable, safe_write, undo_write
from bsdcrypt.enable.remote import read_loader_files, read_root_system
from bsdcrypt.errors import ActError
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.loader.conf import set_yes

REPO = Path(__file__).resolve().parents[2]
ORIGINAL = b'zfs_load="YES"\n'
DECOY = b'decoy_load="YES" # the host\'s own file: never read, never written\n'

Snapshot = dict[str, tuple[object, ...]]


def snapshot(top: Path, *, content: bool = True) -> Snapshot:
    """Every entry under `top` (links not followed): kind, link target or bytes (or size and mtime), mode."""
    out: Snapshot = {}
    if not os.path.lexists(top):
        return out
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_dir():
                out[str(p)] = ("dir", st.st_mode)
            else:
                data: object = p.read_bytes() if content else (st.st_size, st.st_mtime_ns)
                out[str(p)] = ("file", data, st.st_mode)
    return out


@pytest.fixture(autouse=True)
def host_boot_untouched() -> Iterator[None]:
    """This machine's /boot: the same entries, sizes and times after every test (kernels: no reading)."""
    before = snapshot(Path("/boot"), content=False)
    yield
    assert snapshot(Path("/boot"), content=False) == before


@pytest.fixture
def decoy(tmp_path: Path) -> Path:
    """A directory OUTSIDE DIR, laid out like a host's /boot: what a host-followed link would reach."""
    d = tmp_path / "host" / "boot"
    (d / "loader.conf.d").mkdir(parents=True)
    (d / "loader.conf").write_bytes(DECOY)
    (d / "loader.conf.d" / "decoy.conf").write_bytes(DECOY)
    (d / "loader.conf.local").write_bytes(DECOY)
    return d


def system(tmp_path: Path, release: str = "12.4-RELEASE-p9") -> Path:
    """DIR: a FreeBSD system without its boot/ (each test makes that)."""
    root = tmp_path / "sys"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "freebsd-version").write_text(f'#!/bin/sh\nUSERLAND_VERSION="{release}"\n')
    return root


def inside(root: Path, absolute: Path | str) -> Path:
    """Where an absolute path of the system at `root` is (root + path)."""
    return root / str(absolute).lstrip("/")


bsdcrypt = run_cli  # the real command line (its main(): one-line errors on stderr, exit status 3)


def one_line_error(r: subprocess.CompletedProcess[str], text: str) -> None:
    assert r.returncode == 3, (r.stdout, r.stderr)
    errors = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1 and errors[0].startswith("bsdcrypt: ") and text in errors[0], r.stderr


# ---- absolute and relative links on a component before the last ------------------------------------


@pytest.mark.slow
def test_absolute_intermediate_link_is_taken_inside_root(tmp_path: Path, decoy: Path) -> None:
    """DIR/boot -> /<abs path>: that path inside DIR, not on the host (where the decoy is)."""
    root = system(tmp_path)
    real = inside(root, decoy)
    real.mkdir(parents=True)
    (real / "loader.conf").write_bytes(ORIGINAL)
    (root / "boot").symlink_to(decoy)  # absolute, and it exists on the host too
    host_before = snapshot(decoy)

    assert read_loader_files(LocalHost(), str(root)) == [(str(root / "boot" / "loader.conf"), ORIGINAL)]
    r = bsdcrypt("enable", "--persist", "--yes", "--root", str(root))
    assert r.returncode == 0, r.stderr
    assert (real / "loader.conf").read_bytes() == ORIGINAL + b'aesni_load="YES" # bsdcrypt enable: added\n'
    assert f"wrote {root}/boot/loader.conf -> {real}/loader.conf (backup: {real}/loader.conf.bsdcrypt-" in r.stdout
    assert len(list(real.glob("loader.conf.bsdcrypt-*"))) == 1
    assert os.readlink(root / "boot") == str(decoy)  # the link stays
    r = bsdcrypt("disable", "--persist", "--yes", "--root", str(root))
    assert r.returncode == 0, r.stderr
    assert (real / "loader.conf").read_bytes() == ORIGINAL
    assert snapshot(decoy) == host_before  # not a byte, not a lock, not a backup


@pytest.mark.slow
def test_absolute_intermediate_link_missing_inside_root_reads_and_writes_nothing_outside(
    tmp_path: Path, decoy: Path
) -> None:
    root = system(tmp_path)
    (root / "boot").symlink_to(decoy)  # exists on the host only
    host_before, root_before = snapshot(decoy), snapshot(root)

    assert read_loader_files(LocalHost(), str(root)) == []  # the decoy's three files are not read
    r = bsdcrypt("enable", "--persist", "--yes", "--root", str(root))
    one_line_error(r, f"directory {inside(root, decoy)} does not exist; nothing changed")
    assert snapshot(decoy) == host_before and snapshot(root) == root_before


@pytest.mark.slow
def test_relative_intermediate_links_and_a_chain(tmp_path: Path, decoy: Path) -> None:
    """DIR/boot -> altroot/boot, DIR/altroot -> /a/b (absolute, second level): DIR/a/b/boot."""
    root = system(tmp_path, "14.1-RELEASE")
    real = root / "a" / "b" / "boot"
    (real / "loader.conf.d").mkdir(parents=True)
    (real / "loader.conf").write_bytes(ORIGINAL)
    (real / "loader.conf.d" / "x.conf").write_bytes(b"x=1\n")
    (root / "boot").symlink_to("altroot/boot")
    (root / "altroot").symlink_to("/a/b")
    (real / "loader.conf.local").symlink_to("../../../boot/loader.conf.d/local.conf")  # via DIR/boot again
    (real / "loader.conf.d" / "local.conf").write_bytes(b"y=2\n")
    host_before = snapshot(decoy)

    files = read_loader_files(LocalHost(), str(root))
    assert files == [
        (f"{root}/boot/loader.conf", ORIGINAL),
        (f"{root}/boot/loader.conf.d/local.conf", b"y=2\n"),
        (f"{root}/boot/loader.conf.d/x.conf", b"x=1\n"),
        (f"{root}/boot/loader.conf.local", b"y=2\n"),
    ]
    r = bsdcrypt("enable", "--persist", "--yes", "--force", "--root", str(root))
    assert r.returncode == 0, r.stderr
    assert (real / "loader.conf").read_bytes().endswith(b'aesni_load="YES" # bsdcrypt enable: added\n')
    assert (root / "boot").is_symlink() and (root / "altroot").is_symlink()
    assert snapshot(decoy) == host_before


def test_a_chain_of_30_links_is_no_loop(tmp_path: Path) -> None:
    root = system(tmp_path)
    (root / "real").mkdir()
    (root / "real" / "loader.conf").write_bytes(ORIGINAL)
    prev = "/real"
    for i in range(30):
        (root / f"l{i}").symlink_to(prev)
        prev = f"/l{i}"
    (root / "boot").symlink_to(prev)
    assert read_loader_files(LocalHost(), str(root)) == [(f"{root}/boot/loader.conf", ORIGINAL)]


# ---- the bootpool layout (ZFS on root with a separate boot pool) ----------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("target", ["bootpool/boot", "/bootpool/boot"], ids=["relative", "absolute"])
def test_bootpool_layout(tmp_path: Path, target: str) -> None:
    """DIR/boot -> bootpool/boot (bsdinstall's GELI/ZFS layout; /boot -> /bootpool/boot on the running
    system): DIR/bootpool/boot/loader.conf is edited, its backup and lock are there, the link stays."""
    root = system(tmp_path, "13.2-RELEASE")
    real = root / "bootpool" / "boot"
    (real / "loader.conf.d").mkdir(parents=True)
    (real / "loader.conf").write_bytes(b'geom_eli_load="YES"\nzfs_load="YES"\n')
    (real / "loader.conf.d" / "zz.conf").write_bytes(b'aesni_load="NO"\n')  # the winning assignment
    (root / "boot").symlink_to(target)

    r = bsdcrypt("enable", "--persist", "--yes", "--force", "--root", str(root))
    assert r.returncode == 0, r.stderr
    assert f"wrote {root}/boot/loader.conf.d/zz.conf -> {real}/loader.conf.d/zz.conf (backup: " in r.stdout
    assert (real / "loader.conf.d" / "zz.conf").read_bytes() == b'aesni_load="YES" # bsdcrypt enable: was=NO\n'
    assert [p.name for p in (real / "loader.conf.d").glob("*.bsdcrypt-*")] != []
    assert os.readlink(root / "boot") == target
    assert sorted(p.name for p in root.iterdir()) == ["bin", "boot", "bootpool"]  # nothing beside the link
    r = bsdcrypt("disable", "--persist", "--yes", "--root", str(root))
    assert r.returncode == 0, r.stderr
    assert (real / "loader.conf.d" / "zz.conf").read_bytes() == b'aesni_load="NO"\n'


def test_bootpool_write_and_undo_through_the_link(tmp_path: Path) -> None:
    """The safe write and its undo (all files or none) resolve the same way."""
    root = system(tmp_path)
    real = root / "bootpool" / "boot"
    real.mkdir(parents=True)
    (real / "loader.conf").write_bytes(ORIGINAL)
    (root / "boot").symlink_to("/bootpool/boot")
    host = LocalHost()
    (edit,) = set_yes(read_loader_files(host, str(root)), root=str(root))
    result = safe_write(host, edit, root=str(root))
    assert result.target == str(real / "loader.conf") and result.backup and result.backup.startswith(str(real))
    assert (real / "loader.conf").read_bytes() == edit.after
    undo_write(host, edit, result, root=str(root))
    assert (real / "loader.conf").read_bytes() == ORIGINAL
    assert sorted(p.name for p in real.iterdir()) == [".bsdcrypt.lock", "loader.conf"]


@pytest.mark.slow
def test_root_given_through_a_link_of_its_own(tmp_path: Path) -> None:
    """DIR itself may be a link (the user's path, resolved on the host like chroot's argument)."""
    root = system(tmp_path)
    (root / "bootpool" / "boot").mkdir(parents=True)
    (root / "bootpool" / "boot" / "loader.conf").write_bytes(ORIGINAL)
    (root / "boot").symlink_to("/bootpool/boot")
    (tmp_path / "mnt").symlink_to(root)
    r = bsdcrypt("enable", "--persist", "--yes", "--root", str(tmp_path / "mnt"))
    assert r.returncode == 0, r.stderr
    assert b"aesni_load" in (root / "bootpool" / "boot" / "loader.conf").read_bytes()


# ---- refused: `..` out of DIR, loops ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("boot", "../host/boot"),  # relative, climbs out of DIR
        ("boot", "/../host/boot"),  # absolute, then .. above DIR
        ("boot", "bin/../../host/boot"),  # .. in the middle of a target
        ("boot", "/bin/../../../../../../../../../../../../../../../../host/boot"),
        ("boot/loader.conf.d", "../../host/boot/loader.conf.d"),  # a later component
    ],
)
def test_dotdot_out_of_root_is_refused(tmp_path: Path, decoy: Path, link: str, target: str) -> None:
    root = system(tmp_path)
    if link != "boot":
        (root / "boot").mkdir()
    (root / link).symlink_to(target)
    host_before, root_before = snapshot(decoy), snapshot(root)

    with pytest.raises(ActError, match="leads outside"):
        read_loader_files(LocalHost(), str(root))
    for args in (["--dry-run"], ["--yes"]):
        r = bsdcrypt("enable", "--persist", *args, "--root", str(root))
        one_line_error(r, f"a symbolic link on its path leads outside {root}")
    # the write side on its own (a plan made before the link appeared)
    path = f"{root}/boot/loader.conf" if link == "boot" else f"{root}/boot/loader.conf.d/aesni.conf"
    (edit,) = set_yes([(path, b'aesni_load="NO"\n')], root=str(root))
    with pytest.raises(ActError, match=f"cannot write {path}: a symbolic link on its path leads outside"):
        check_writable(LocalHost(), [edit], root=str(root))
    with pytest.raises(ActError, match="leads outside"):
        safe_write(LocalHost(), edit, root=str(root))
    assert snapshot(decoy) == host_before and snapshot(root) == root_before


@pytest.mark.slow
def test_a_loop_on_an_intermediate_component_is_refused(tmp_path: Path, decoy: Path) -> None:
    root = system(tmp_path)
    (root / "boot").symlink_to("b1")
    (root / "b1").symlink_to(decoy)  # absolute: DIR/<decoy> ...
    inside(root, decoy).parent.mkdir(parents=True)
    inside(root, decoy).symlink_to("/boot")  # ... -> DIR/boot: a loop inside DIR
    host_before, root_before = snapshot(decoy), snapshot(root)

    with pytest.raises(ActError, match="loop"):
        read_loader_files(LocalHost(), str(root))
    one_line_error(bsdcrypt("enable", "--persist", "--yes", "--root", str(root)), "loop")
    edit = set_yes([], root=str(root))[0]
    with pytest.raises(ActError, match="loop"):
        check_writable(LocalHost(), [edit], root=str(root))
    with pytest.raises(ActError, match="loop"):
        safe_write(LocalHost(), edit, root=str(root))
    assert snapshot(decoy) == host_before and snapshot(root) == root_before


@pytest.mark.slow
def test_boot_to_slash_boot_is_a_loop_not_the_hosts_boot(tmp_path: Path) -> None:
    """DIR/boot -> /boot (a jail or image): the system at DIR would loop; the host's /boot is never used.
    Only read-only calls here (a --dry-run), so a regression could not write the real /boot."""
    root = system(tmp_path)
    (root / "boot").symlink_to("/boot")
    with pytest.raises(ActError, match="loop"):
        read_loader_files(LocalHost(), str(root))
    one_line_error(bsdcrypt("enable", "--persist", "--dry-run", "--root", str(root)), "loop")


# ---- the other reads under DIR -----------------------------------------------------------------------


def test_release_arch_and_appliance_are_read_inside_root(tmp_path: Path) -> None:
    """bin/, boot/kernel/ and etc/ reached through links are read inside DIR, never on the host."""
    root = tmp_path / "sys"
    root.mkdir()
    host_bin, host_etc = tmp_path / "host" / "bin", tmp_path / "host" / "etc"
    host_bin.mkdir(parents=True)
    host_etc.mkdir(parents=True)
    (host_bin / "freebsd-version").write_text('USERLAND_VERSION="14.1-RELEASE"\n')
    (host_etc / "platform").write_text("pfSense\n")
    (host_etc / "version").write_text("2.7.2-RELEASE\n")
    inside(root, host_bin).mkdir(parents=True)
    inside(root, host_bin).joinpath("freebsd-version").write_text('USERLAND_VERSION="12.4-RELEASE"\n')
    (root / "bin").symlink_to(host_bin)  # absolute: DIR/<host_bin>
    (root / "etc").symlink_to("../host/etc")  # out of DIR: not read, so no appliance
    (root / "bootpool" / "boot" / "kernel").mkdir(parents=True)
    (root / "bootpool" / "boot" / "kernel" / "kernel").write_bytes(
        b"\x7fELF\x02\x01\x01" + bytes(11) + b"\xb7\x00" + bytes(40)
    )
    (root / "boot").symlink_to("/bootpool/boot")
    system_at = read_root_system(LocalHost(), str(root))
    assert (system_at.release, system_at.arch, system_at.variant) == ("12.4-RELEASE", "aarch64", None)


def test_loader_conf_d_through_an_absolute_link_is_not_globbed_on_the_host(tmp_path: Path, decoy: Path) -> None:
    root = system(tmp_path, "14.1-RELEASE")
    (root / "boot").mkdir()
    (root / "boot" / "loader.conf").write_bytes(ORIGINAL)
    (root / "boot" / "loader.conf.d").symlink_to(decoy / "loader.conf.d")  # not inside DIR
    assert read_loader_files(LocalHost(), str(root)) == [(f"{root}/boot/loader.conf", ORIGINAL)]
    inside(root, decoy / "loader.conf.d").mkdir(parents=True)
    inside(root, decoy / "loader.conf.d").joinpath("in.conf").write_bytes(b"z=1\n")
    assert read_loader_files(LocalHost(), str(root)) == [
        (f"{root}/boot/loader.conf", ORIGINAL),
        (f"{root}/boot/loader.conf.d/in.conf", b"z=1\n"),
    ]


def test_a_link_that_appears_after_resolving_stops_the_write(
    tmp_path: Path, decoy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the lock the resolved directory must still be itself: swapped for a link to the decoy
    between resolving and writing, nothing is written there."""
    from bsdcrypt.enable import act

    root = system(tmp_path)
    (root / "boot").mkdir()
    (root / "boot" / "loader.conf").write_bytes(ORIGINAL)
    host = LocalHost()
    (edit,) = set_yes(read_loader_files(host, str(root)), root=str(root))
    check = 'samepath "nothing written, run again"'
    swap = f'mv "$DIR" "$DIR.moved" && ln -s {decoy} "$DIR"\n{check}'
    real = act.shell_text
    assert check in real("write.sh")
    monkeypatch.setattr(act, "shell_text", lambda name: real(name).replace(check, swap, 1) if name == "write.sh" else real(name))
    host_before = snapshot(decoy)
    with pytest.raises(ActError, match="a symbolic link appeared on the path of .* nothing written"):
        safe_write(host, edit, root=str(root))
    assert snapshot(decoy) == host_before
    assert (root / "boot.moved" / "loader.conf").read_bytes() == ORIGINAL
