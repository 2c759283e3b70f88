"""Issue 11 part 2: an empty or foreign target is an error, never "the live host"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import run_cli
from freebsd_tree import MACHINES, add_kernel
from typer.testing import CliRunner

from bsdcrypt.cli import app, register_commands

ROOT = Path(__file__).resolve().parents[2]
REC = "freebsd-12.2-bhyve-not-loaded-overridden"
register_commands(["bsdcrypt"])
runner = CliRunner()

# Every option and argument naming a path or a target, each given an empty value (an unset $VAR).
EMPTY = [
    (["status", "-H", ""], "--host"),
    (["status", "-o", ""], "--output"),
    (["record", "-o", ""], "--output"),
    (["record", "-o", "x.yaml", "-H", ""], "--host"),
    # --dry-run, not -y: were this ever to regress, the test must not edit this machine's /boot
    (["enable", "-p", "-n", "-R", ""], "--root"),
    (["enable", "-p", "-n", "--root="], "--root"),
    (["enable", "-p", "-n", "-H", ""], "--host"),
    (["disable", "-p", "-n", "-R", ""], "--root"),
    (["fleet-audit", ""], "HOSTS_FILE"),
    (["fleet-audit", "hosts.txt", "-F", ""], "--ssh-config"),
    (["fleet-audit", "hosts.txt", "-o", ""], "--output"),
    (["analyze", ""], "FILE"),
    (["analyze", "a.out", ""], "FILE"),
    (["analyze", "a.out", "-o", ""], "--output"),
    (["analyze", "a.out", "--token", ""], "--token"),
    (["bench", "-H", ""], "--host"),
    (["bench", "--save", ""], "--save"),
    (["bench", "-o", ""], "--output"),
    (["enable", "-p", "-n", "--bench", "--bench-html", ""], "--bench-html"),
    (["userland", "-n", "-R", ""], "--root"),
]


@pytest.mark.parametrize(("args", "option"), EMPTY, ids=[" ".join(a) for a, _ in EMPTY])
def test_an_empty_path_or_target_is_a_usage_error(args: list[str], option: str) -> None:
    """A real process each: `enable -p -R ''` must never plan (let alone act) on the running system."""
    r = run_cli(*args)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert r.stdout == ""  # no plan, no report
    assert r.stderr.startswith("bsdcrypt: Invalid value for") and option in r.stderr and "must not be empty" in r.stderr
    assert r.stderr.count("\n") == 1


@pytest.mark.slow
def test_an_empty_bsdcrypt_host_is_not_set() -> None:
    """click reads an empty environment variable as unset: the default (local) applies, as documented."""
    r = subprocess.run(
        [sys.executable, "-m", "bsdcrypt", "status", "-f", "json", "-H", f"replay:{REC}"],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=120, env={"BSDCRYPT_HOST": "", "PATH": ""},
    )
    assert r.returncode == 1 and '"host"' in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["enable", "-y", "-H", f"replay:{REC}"],
        ["enable", "-p", "-y", "-H", f"replay:{REC}"],
        ["enable", "-p", "-H", f"replay:{REC}"],
        ["disable", "-p", "-y", "-H", f"replay:{REC}"],
    ],
)
def test_a_recording_cannot_be_changed(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 3, result.output
    assert result.output == (
        f"bsdcrypt: replay:{REC} is a recording, and a recording cannot be changed; use --dry-run to see the plan\n"
    )


def test_a_recording_still_shows_its_plan_with_dry_run() -> None:
    result = runner.invoke(app, ["enable", "-p", "-n", "-H", f"replay:{REC}"])
    assert result.exit_code == 0 and "aesni_load" in result.output


def test_end_of_input_at_the_prompt_is_interrupted_not_declined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_kernel(tmp_path)
    conf = tmp_path / "boot" / "loader.conf"
    conf.write_bytes(b"a=1\n")
    monkeypatch.setattr("bsdcrypt.cli.enable.sys", SimpleNamespace(stdin=SimpleNamespace(isatty=lambda: True)))
    result = runner.invoke(app, ["enable", "--persist", "--root", str(tmp_path)], input="")
    assert result.exit_code == 130, result.output
    assert "bsdcrypt: interrupted at the confirmation prompt: nothing changed\n" in result.output
    assert conf.read_bytes() == b"a=1\n" and sorted(p.name for p in conf.parent.iterdir()) == ["kernel", "loader.conf"]


# ---------------------------------------------------------------------------- foreign trees under --root


def _tree(tmp_path: Path, kind: str) -> Path:
    root = tmp_path / kind
    (root / "boot").mkdir(parents=True)
    (root / "boot" / "loader.conf").write_bytes(b'zfs_load="YES"\n')
    if kind in MACHINES:
        add_kernel(root, kind)
    elif kind == "garbage-kernel":
        (root / "boot" / "kernel").mkdir()
        (root / "boot" / "kernel" / "kernel").write_bytes(b"MZ\x90\x00 not an ELF file at all" * 4)
    elif kind == "short-kernel":
        (root / "boot" / "kernel").mkdir()
        (root / "boot" / "kernel" / "kernel").write_bytes(b"\x7fELF\x02")
    elif kind == "linux":  # what a Linux /boot holds: vmlinuz and an initrd, no boot/kernel/kernel
        (root / "boot" / "vmlinuz-6.1.0-18-amd64").write_bytes(b"\x4d\x5a" + bytes(62))
        (root / "etc").mkdir()
        (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    elif kind == "userland-only":  # a custom kernel= elsewhere: the userland still says FreeBSD
        (root / "bin").mkdir()
        (root / "bin" / "freebsd-version").write_text('#!/bin/sh\nUSERLAND_VERSION="12.4-RELEASE-p9"\n')
    return root


FOREIGN = [
    ("empty", "it has neither a kernel (boot/kernel/kernel) nor a userland (bin/freebsd-version)"),
    ("linux", "it has neither a kernel"),
    ("garbage-kernel", "boot/kernel/kernel is not an ELF file, so not a FreeBSD kernel"),
    ("short-kernel", "boot/kernel/kernel is not an ELF file"),
    ("riscv64", "FreeBSD has no AES acceleration driver for riscv64"),
    ("powerpc64le", "FreeBSD has no AES acceleration driver for powerpc64le"),
]


@pytest.mark.parametrize(("kind", "reason"), FOREIGN, ids=[k for k, _ in FOREIGN])
@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
def test_a_tree_that_is_not_freebsd_is_refused_like_such_a_host(
    tmp_path: Path, kind: str, reason: str, force: bool
) -> None:
    root = _tree(tmp_path, kind)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    args = ["enable", "-p", "-y", "-R", str(root)] + (["--force"] if force else [])
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output  # refused, as on a running host of that kind
    assert "! refused: " in result.output and reason in result.output
    assert (root / "boot" / "loader.conf").read_bytes() == b'zfs_load="YES"\n'
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # no backup, no lock, nothing


@pytest.mark.parametrize(("kind", "driver"), [("amd64", "aesni"), ("i386", "aesni"), ("aarch64", "armv8crypto"),
                                              ("userland-only", "aesni")])
def test_a_freebsd_tree_is_planned(tmp_path: Path, kind: str, driver: str) -> None:
    root = _tree(tmp_path, kind)
    result = runner.invoke(app, ["enable", "-p", "-n", "-R", str(root)])
    assert result.exit_code == 0, result.output
    assert f'+{driver}_load="YES"' in result.output


def test_root_slash_on_this_linux_machine_is_refused() -> None:
    """`-R /` here (Debian, no boot/kernel/kernel): the refusal of a Linux host, not a plan."""
    if Path("/boot/kernel/kernel").exists() or Path("/bin/freebsd-version").exists():
        pytest.skip("this machine looks like FreeBSD")
    result = runner.invoke(app, ["enable", "-p", "-n", "-R", "/"])
    assert result.exit_code == 2, result.output
    assert "the system at / is not a FreeBSD-family system" in result.output


@pytest.mark.slow
def test_a_dangling_loader_conf_link_reads_as_no_file(tmp_path: Path) -> None:
    """docs/enable.md: a link to nothing inside DIR is no file; enable creates its target (the link stays)."""
    root = tmp_path / "r"
    add_kernel(root)
    (root / "boot" / "loader.conf").symlink_to("/nonexistent")  # inside DIR: DIR/nonexistent
    (root / "boot" / "loader.conf.local").symlink_to("gone")
    dry = runner.invoke(app, ["enable", "-p", "-n", "-R", str(root)])
    assert dry.exit_code == 0, dry.output
    assert "cat:" not in dry.output and "cannot read" not in dry.output
    assert "--- /dev/null" in dry.output
    done = runner.invoke(app, ["enable", "-p", "-y", "-R", str(root)])
    assert done.exit_code == 0, done.output
    assert (root / "boot" / "loader.conf").is_symlink()
    assert (root / "nonexistent").read_bytes() == b'aesni_load="YES" # bsdcrypt enable: added\n'
