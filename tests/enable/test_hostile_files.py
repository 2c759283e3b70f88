"""Issue 26: loader files under --root and on hosts are untrusted. A device, a FIFO or a huge file (even
behind a link inside the root, as a jail's devfs gives) is one line in bounded time and memory: the shell
checks type and size before reading (probe.READ_FUNCTION), Python checks the 1 MiB limit before parsing."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

from bsdcrypt.enable.remote import read_loader_files, read_root_system
from bsdcrypt.errors import ActError
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.probe import MAX_FILE_BYTES, build_script, parse_output

from .conftest import write

ROOT = Path(__file__).resolve().parents[2]


def _zero_device(path: Path) -> None:
    """A character device node (1,5 = zero on Linux) inside the temporary root, as a jail's devfs has."""
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))


def _enable_root(root: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("enable", "--persist", "--yes", "--root", str(root), timeout=300)


def _one_line_refusal(r: subprocess.CompletedProcess[str], why: str) -> None:
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr
    assert r.stderr.count("\n") == 1 and why in r.stderr, r.stderr


@pytest.mark.slow
def test_a_loader_conf_linked_to_a_device_inside_the_root_is_one_line(root: Path) -> None:
    _zero_device(root / "dev" / "zero")
    (root / "boot" / "loader.conf").symlink_to("/dev/zero")  # inside the root, like sysrc -R
    r = _enable_root(root)
    _one_line_refusal(r, "loader.conf: not a regular file (a device, FIFO or socket): not read")
    assert (root / "boot" / "loader.conf").is_symlink() and not list((root / "boot").glob("*.bsdcrypt-*"))


@pytest.mark.slow
def test_a_fifo_loader_conf_is_one_line_and_never_waits(root: Path) -> None:
    os.mkfifo(root / "boot" / "loader.conf")
    r = _enable_root(root)
    _one_line_refusal(r, "loader.conf: not a regular file (a device, FIFO or socket): not read")
    assert stat.S_ISFIFO(os.stat(root / "boot" / "loader.conf").st_mode)


@pytest.mark.slow
def test_a_huge_loader_conf_is_refused_by_its_size_before_it_is_read(root: Path) -> None:
    with open(root / "boot" / "loader.conf", "wb") as fh:
        fh.truncate(75 << 20)  # sparse: 75 MB of size, no disk use
    r = _enable_root(root)
    _one_line_refusal(r, "loader.conf: larger than 1 MiB (78643200 bytes): not read")


@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_a_loader_conf_d_entry_or_named_file_of_any_kind_is_bounded(root: Path, kind: str) -> None:
    d = root / "boot" / "loader.conf.d"
    target = root / "x"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        _zero_device(target)
    else:
        with open(target, "wb") as fh:
            fh.truncate(MAX_FILE_BYTES + 1)
    (d / "a.conf").symlink_to("/x")
    with pytest.raises(ActError, match=r"a\.conf: (not a regular file|larger than 1 MiB)"):
        read_loader_files(LocalHost(), str(root))
    (d / "a.conf").unlink()
    write(root / "boot" / "loader.conf", f'loader_conf_files="{target}"\n'.encode())
    files = dict(read_loader_files(LocalHost(), str(root)))
    # not a regular file: nothing the loader reads at boot, left out; too large: one line
    assert str(target) not in files or len(files[str(target)]) <= MAX_FILE_BYTES


def test_a_file_of_exactly_the_limit_is_read(root: Path) -> None:
    data = b"#" * (MAX_FILE_BYTES - 1) + b"\n"
    write(root / "boot" / "loader.conf", data)
    assert dict(read_loader_files(LocalHost(), str(root)))[str(root / "boot" / "loader.conf")] == data


def test_the_probe_reads_no_device_fifo_or_huge_file(tmp_path: Path) -> None:
    """The probe's file steps: status 2 and one line, nothing read; a missing file stays cat's status 1."""
    r = str(tmp_path)
    boot = tmp_path / "boot"
    boot.mkdir()
    os.mkfifo(boot / "loader.conf")
    with open(boot / "loader.conf.local", "wb") as fh:
        fh.truncate(80 << 20)
    (boot / "device.hints").symlink_to("/dev/zero")
    script = build_script("@@tok").replace(" /boot/", f" {r}/boot/").replace("'/boot/", f"'{r}/boot/")
    proc = subprocess.run(["sh"], input=script.encode(), capture_output=True, check=False, timeout=300)
    ev = parse_output(proc.stdout, "@@tok")
    # (the step names stay /boot/...: only the paths read were moved under the temporary tree)
    fifo, big, dev = (ev.steps[f"file:/boot/{n}"] for n in ("loader.conf", "loader.conf.local", "device.hints"))
    assert (fifo.rc, fifo.out) == (2, b"not a regular file (a device, FIFO or socket): not read\n")
    assert (big.rc, big.out) == (2, b"larger than 1 MiB (83886080 bytes): not read\n")
    assert dev.rc == 2
    assert len(proc.stdout) < 1 << 20


def test_read_root_system_reads_no_huge_product_file(root: Path) -> None:
    (root / "etc").mkdir()
    with open(root / "etc" / "version", "wb") as fh:
        fh.truncate(50 << 20)
    os.mkfifo(root / "etc" / "platform")
    system = read_root_system(LocalHost(), str(root))
    assert system.variant is None
