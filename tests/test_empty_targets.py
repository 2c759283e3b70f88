"""Issue 11 part 2: an empty or foreign target is an error, never "the live host"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from bsdcrypt.cli import _register_commands, app

ROOT = Path(__file__).resolve().parent.parent
REC = "freebsd-12.2-bhyve-not-loaded-overridden"
_register_commands(["bsdcrypt"])
runner = CliRunner()

# Every option and argument naming a path or a target, each given an empty value (an unset $VAR).
EMPTY = [
    (["status", "-H", ""], "--host"),
    (["status", "-o", ""], "--output"),
    (["record", "-o", ""], "--output"),
    (["record", "-o", "x.yaml", "-H", ""], "--host"),
    (["enable", "-p", "-y", "-R", ""], "--root"),
    (["enable", "-p", "-n", "--root="], "--root"),
    (["enable", "-p", "-y", "-H", ""], "--host"),
    (["disable", "-p", "-y", "-R", ""], "--root"),
    (["fleet-audit", ""], "hosts_file"),
    (["fleet-audit", "hosts.txt", "-F", ""], "--ssh-config"),
    (["fleet-audit", "hosts.txt", "-o", ""], "--output"),
    (["analyze", ""], "files"),
    (["analyze", "a.out", ""], "files"),
    (["analyze", "a.out", "-o", ""], "--output"),
    (["analyze", "a.out", "--token", ""], "--token"),
    (["bench", "-H", ""], "--host"),
    (["bench", "--save", ""], "--save"),
    (["bench", "-o", ""], "--output"),
]


@pytest.mark.parametrize(("args", "option"), EMPTY, ids=[" ".join(a) for a, _ in EMPTY])
def test_an_empty_path_or_target_is_a_usage_error(args: list[str], option: str) -> None:
    """A real process each: `enable -p -y -R ''` must never plan (let alone act) on the running system."""
    r = subprocess.run(
        [sys.executable, "-m", "bsdcrypt", *args], capture_output=True, text=True, cwd=ROOT, check=False, timeout=120
    )
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert r.stdout == ""  # no plan, no report
    assert r.stderr.startswith("bsdcrypt: Invalid value for") and option in r.stderr and "must not be empty" in r.stderr
    assert r.stderr.count("\n") == 1


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
    (tmp_path / "boot").mkdir()
    conf = tmp_path / "boot" / "loader.conf"
    conf.write_bytes(b"a=1\n")
    monkeypatch.setattr("bsdcrypt.commands.enable.sys", SimpleNamespace(stdin=SimpleNamespace(isatty=lambda: True)))
    result = runner.invoke(app, ["enable", "--persist", "--root", str(tmp_path)], input="")
    assert result.exit_code == 130, result.output
    assert "bsdcrypt: interrupted at the confirmation prompt: nothing changed\n" in result.output
    assert conf.read_bytes() == b"a=1\n" and sorted(p.name for p in conf.parent.iterdir()) == ["loader.conf"]
