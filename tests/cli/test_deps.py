"""Issue 28: a missing optional dependency is one line naming the package to install, exit 3, no traceback.

The FreeBSD install recipe (docs/install-freebsd.md) installs the dependencies from packages and bsdcrypt
with `pip install --no-deps`; a package left out must not end in a traceback when a command needs it.
Each case runs the real CLI in a process where importing that one module fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bsdcrypt.cli.deps import KNOWN, missing_line, package

ROOT = Path(__file__).resolve().parents[2]
PREFIX = f"py{sys.version_info.major}{sys.version_info.minor}-"


def _run_without(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        f"sys.modules[{module!r}] = None  # import {module} now fails as if it were not installed\n"
        f"sys.argv = ['bsdcrypt', *{list(args)!r}]\n"
        "from bsdcrypt.cli import main\n"
        "main()\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          check=False)


@pytest.mark.slow
@pytest.mark.parametrize(("module", "pkg"), [("markupsafe", "markupsafe"), ("jinja2", "Jinja2")])
def test_html_without_jinja2_or_markupsafe_is_one_line(module: str, pkg: str) -> None:
    r = _run_without(module, "status", "-H", "replay:freebsd-13.0-hyperv-builtin", "-f", "html")
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert r.stderr.count("\n") == 1, r.stderr
    assert f"pkg install {PREFIX}{pkg}" in r.stderr and "-f html" in r.stderr


@pytest.mark.slow
def test_the_table_still_works_without_jinja2() -> None:
    r = _run_without("jinja2", "status", "-H", "replay:freebsd-13.0-hyperv-builtin")
    assert r.returncode == 0 and "Verdict" in r.stdout, r.stderr


@pytest.mark.slow
def test_ssh_without_paramiko_is_one_line(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("admin@fw1.example.org\n")
    for args in (("fleet-audit", "-q", str(hosts)), ("status", "-H", "admin@fw1.example.org")):
        r = _run_without("paramiko", *args)
        assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1 and f"pkg install {PREFIX}paramiko" in r.stderr, r.stderr


def test_without_typer_every_command_is_one_line() -> None:
    r = _run_without("typer", "status", "-H", "replay:freebsd-13.0-hyperv-builtin")
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and f"pkg install {PREFIX}typer" in r.stderr


def test_package_names() -> None:
    assert package("devel/py-Jinja2") == f"{PREFIX}Jinja2"
    assert package("devel/py-pyyaml") == f"{PREFIX}pyyaml"
    err = ModuleNotFoundError("No module named 'markupsafe'", name="markupsafe")
    line = missing_line(err)
    assert line is not None and line.startswith("bsdcrypt: ") and "\n" not in line
    assert missing_line(ModuleNotFoundError("x", name="not_ours")) is None
    assert missing_line(ValueError("markupsafe")) is None
    assert set(KNOWN) >= {"jinja2", "markupsafe", "paramiko", "cryptography", "yaml", "tabulate", "typer"}
