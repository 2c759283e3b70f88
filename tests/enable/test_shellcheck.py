"""Issue 29: the shell that runs on hosts lives in .sh files (bsdcrypt/enable/sh/), shipped as package data
and checked by shellcheck. Without shellcheck the check skips, unless BSDCRYPT_REQUIRE_SHELLCHECK=1 (CI)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import bsdcrypt.enable
from bsdcrypt.enable.act import check_script, write_script
from bsdcrypt.enable.remote import shell_text
from bsdcrypt.loader.conf import FileEdit

SH = Path(bsdcrypt.enable.__file__).parent / "sh"
FILES = sorted(SH.glob("*.sh"))


def _shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found is None:
        if os.environ.get("BSDCRYPT_REQUIRE_SHELLCHECK") == "1":
            pytest.fail("BSDCRYPT_REQUIRE_SHELLCHECK=1 but shellcheck is missing (apt install shellcheck)")
        pytest.skip("shellcheck is not installed")
    return found


def test_the_files_are_there() -> None:
    assert {p.name for p in FILES} == {"resolve.sh", "lib.sh", "check.sh", "write.sh", "undo.sh", "wrapper.sh"}
    for p in FILES:
        assert shell_text(p.name) == p.read_text(encoding="utf-8")


def test_shellcheck_passes_on_every_file() -> None:
    r = subprocess.run([_shellcheck(), "-s", "sh", *map(str, FILES)], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_the_assembled_scripts_pass_shellcheck_too(tmp_path: Path) -> None:
    """What the host runs: the values set by Python (quoted), then the files; the locked body passed in BODY
    is checked as its own script."""
    edit = FileEdit("/boot/loader.conf", b"a=1\n", b"a=2\n")
    scripts = {"write": write_script(edit, root="/mnt/x y"), "check": check_script([edit], root="/mnt")}
    scripts["body"] = shell_text("lib.sh") + shell_text("write.sh")
    for name, text in scripts.items():
        path = tmp_path / f"{name}.sh"
        path.write_text(text)
        assert subprocess.run(["sh", "-n", str(path)], check=False).returncode == 0, name
        r = subprocess.run([_shellcheck(), "-s", "sh", "-S", "warning", str(path)], capture_output=True, text=True,
                           timeout=300, check=False)
        assert r.returncode == 0, (name, r.stdout)
