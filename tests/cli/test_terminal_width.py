"""Issue 28: on an 80-column terminal every text report fits, and nothing in it is lost.

Each command runs as a real process whose standard output and error are a pseudo-terminal of 80
columns (TIOCSWINSZ), as on the FreeBSD vt console or a serial line; what it writes there is read back
and every line measured (the progress bar's redraws included). The same commands with standard output
a pipe keep whole lines (no wrapping); on a terminal COLUMNS sets the width (docs/output.md).
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from conftest import run_cli

from bsdcrypt.recording import shipped_names

ROOT = Path(__file__).resolve().parents[2]
NAMES = shipped_names()
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "BSDCRYPT_HOST")}
    env.update(extra)
    return env


def on_terminal(*args: str, columns: int = 80, **env: str) -> tuple[int, list[str]]:
    """Run bsdcrypt with stdout and stderr on a pty `columns` wide; (exit status, the lines it showed).
    A carriage return starts a new piece of line too (the progress bar redraws itself with them)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "bsdcrypt", *args],
        stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=ROOT, env=_env(**env),
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the process and everything holding the pty are gone
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(timeout=300)
    text = _ESCAPE.sub("", b"".join(chunks).decode("utf-8", "replace")).replace("\r\n", "\n")
    return code, [piece for line in text.split("\n") for piece in line.split("\r")]


def piped(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, unset=("COLUMNS", "LINES", "BSDCRYPT_HOST"), timeout=300)


def _too_wide(lines: list[str], columns: int = 80) -> list[str]:
    return [line for line in lines if len(line) > columns]


def _words(text: str) -> list[str]:
    """The words of a report, but a table's underlines (their length follows the columns)."""
    return [w for w in text.split() if set(w) != {"-"}]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_status_fits_80_columns_and_keeps_every_word(name: str) -> None:
    code, lines = on_terminal("status", "--host", f"replay:{name}")
    assert not _too_wide(lines), "\n".join(lines)
    whole = piped("status", "--host", f"replay:{name}")
    assert whole.returncode == code
    assert _words("\n".join(lines)) == _words(whole.stdout) or sorted(_words("\n".join(lines))) == sorted(
        _words(whole.stdout)
    ), "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_enable_dry_run_fits_80_columns(name: str) -> None:
    for persist in ((), ("--persist",)):
        code, lines = on_terminal("enable", "--dry-run", *persist, "--host", f"replay:{name}")
        assert not _too_wide(lines), "\n".join(lines)
        whole = piped("enable", "--dry-run", *persist, "--host", f"replay:{name}")
        assert whole.returncode == code
        assert sorted(_words("\n".join(lines))) == sorted(_words(whole.stdout + whole.stderr)), "\n".join(lines)


@pytest.mark.slow
def test_fleet_audit_and_analyze_fit_80_columns(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("".join(f"replay:{name}\n" for name in NAMES))
    code, lines = on_terminal("fleet-audit", str(hosts))
    assert not _too_wide(lines), "\n".join(lines)
    header = next(i for i, line in enumerate(lines) if line.startswith("host "))
    first = len(lines[header]) - len(lines[header][4:].lstrip())  # where the second column starts
    body = lines[header + 2:lines.index("", header)]
    shown = "".join(line[:first].strip() for line in body)
    for name in NAMES:  # every host is there, whole, if across lines of its cell
        assert f"replay:{name}" in shown, name
    assert code == piped("fleet-audit", str(hosts)).returncode
    for folder in ("hosts", "pastes"):  # every recording, then every real paste
        code, lines = on_terminal("analyze", str(ROOT / "fixtures" / folder))
        assert not _too_wide(lines), "\n".join(lines)


def test_recordings_listing_fits_80_columns() -> None:
    code, lines = on_terminal("recordings")
    assert code == 0 and not _too_wide(lines), "\n".join(lines)


@pytest.mark.slow
def test_pipes_keep_whole_lines_and_columns_sets_the_width() -> None:
    name = "freebsd-12.2-bhyve-not-loaded-overridden"  # its remedy line is 170 characters
    whole = piped("status", "--host", f"replay:{name}")
    assert max(len(line) for line in whole.stdout.splitlines()) > 120
    # a pipe keeps whole lines even with COLUMNS set (readline-using programs export it to children)
    assert piped("status", "--host", f"replay:{name}", COLUMNS="60").stdout == whole.stdout
    _, narrow = on_terminal("status", "--host", f"replay:{name}", COLUMNS="60")
    assert max(len(line) for line in narrow) <= 60  # on a terminal COLUMNS wins over its own width
    assert sorted(_words("\n".join(narrow))) == sorted(_words(whole.stdout))
    _, wide = on_terminal("status", "--host", f"replay:{name}", COLUMNS="200")
    assert max(len(line) for line in wide) > 120


@pytest.mark.slow
def test_machine_formats_and_files_are_never_wrapped(tmp_path: Path) -> None:
    name = "freebsd-12.2-bhyve-not-loaded-overridden"
    _, lines = on_terminal("status", "--host", f"replay:{name}", "-f", "json")
    assert max(len(line) for line in lines) > 80  # JSON: one line per member, whatever the width
    out = tmp_path / "report.txt"
    on_terminal("status", "--host", f"replay:{name}", "-o", str(out))
    assert out.read_text() == piped("status", "--host", f"replay:{name}").stdout
    # the fleet table written with -o keeps every column, on a terminal too (the summary's timing aside)
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("".join(f"replay:{n}\n" for n in NAMES))
    table = tmp_path / "fleet.txt"
    on_terminal("fleet-audit", "-q", str(hosts), "-o", str(table))
    whole = piped("fleet-audit", "-q", str(hosts)).stdout
    assert "OS / release" in table.read_text() and "GELI on software" in table.read_text()
    assert table.read_text().splitlines()[:-1] == whole.splitlines()[:-1]


@pytest.mark.slow
def test_every_help_fits_80_columns() -> None:
    commands = ["", "status", "record", "recordings", "enable", "disable", "bench", "bench geli", "bench userland",
                "bench cleanup", "bench compare", "fleet-audit", "analyze", "probe-script", "userland"]
    for command in commands:
        for env in ({}, {"NO_COLOR": "1"}):
            code, lines = on_terminal(*command.split(), "--help", **env)
            assert code == 0 and not _too_wide(lines), (command, env, "\n".join(lines))
