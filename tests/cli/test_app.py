"""-v/--verbose (the commands run on each host, on stderr), NO_COLOR, and shell completion."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from bsdcrypt.cli.app import reflow
from bsdcrypt.errors import HostError
from bsdcrypt.hostapi import RunResult
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.hosts.verbose import VerboseHost, probe_commands

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from bsdcrypt.cli import main; main()"]
REC = "freebsd-13.0-hyperv-builtin"
ANSI = re.compile(rb"\x1b\[")


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env)


@pytest.mark.slow
def test_verbose_lists_every_probe_command_per_host_and_keeps_stdout() -> None:
    quiet = _cli("status", "--host", f"replay:{REC}", "-f", "json")
    loud = _cli("-v", "status", "--host", f"replay:{REC}", "-f", "json")
    assert quiet.stderr == "" and loud.stdout == quiet.stdout and loud.returncode == quiet.returncode
    lines = loud.stderr.splitlines()
    prefix = f"bsdcrypt: replay:{REC}: "  # the host as the user named it
    assert all(line.startswith(prefix) for line in lines)
    body = [line[len(prefix):] for line in lines]
    assert body[0] == f"replay the recording (nothing runs; it answers the probe's {len(probe_commands())} steps):"
    assert body[1:-1] == [f"  {c}" for c in probe_commands()]
    assert re.fullmatch(r"exit 0, \d+ bytes out, 0 bytes err, \d+\.\d\ds", body[-1])
    assert "  kldstat -q -m nexus/aesni" in body and "  cat /boot/loader.conf" in body


@pytest.mark.slow
def test_verbose_on_a_real_host_says_the_probe_runs() -> None:
    loud = _cli("-v", "status", "-f", "json")  # this machine: the probe really runs
    assert loud.stderr.startswith("bsdcrypt: local: run the read-only probe (one sh script,")
    assert "replay" not in loud.stderr


@pytest.mark.slow
def test_verbose_from_the_environment_and_in_fleet_audit(tmp_path: Path) -> None:
    assert "kldstat -v" in _cli("status", "--host", f"replay:{REC}", BSDCRYPT_VERBOSE="1").stderr
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"replay:{REC}\nreplay:freebsd-12.2-bhyve-not-loaded-overridden\n")
    r = _cli("--verbose", "fleet-audit", "-q", str(hosts))
    assert r.returncode == 1
    for name in (REC, "freebsd-12.2-bhyve-not-loaded-overridden"):
        assert re.search(rf"^bsdcrypt: replay:\S*{name}\S*:   kldstat -v$", r.stderr, re.M), r.stderr
        assert re.search(rf"^bsdcrypt: replay:\S*{name}\S*: replay the recording \(nothing runs", r.stderr, re.M)


def test_verbose_host_logs_commands_input_results_and_failures() -> None:
    out = io.StringIO()
    host = VerboseHost(LocalHost(), out)
    assert host.run("printf hi\nprintf ' there'", input=b"xyz").stdout == b"hi there"
    host.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "bsdcrypt: local: $ printf hi  (with 3 bytes on stdin)"
    assert lines[1] == "bsdcrypt: local:   printf ' there'"
    assert lines[2].startswith("bsdcrypt: local: exit 0, 8 bytes out, 0 bytes err, ")

    class Broken:
        name, spec, kind, can_exec = "b", "ssh:b", "ssh", True
        aborted = False

        def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
            raise HostError("connection reset")

        def close(self) -> None: ...

        def abort(self) -> None:
            self.aborted = True

    out = io.StringIO()
    inner = Broken()
    broken = VerboseHost(inner, out)
    with pytest.raises(HostError):
        broken.run("true")
    assert "bsdcrypt: ssh:b: failed after" in out.getvalue() and "connection reset" in out.getvalue()
    broken.abort()
    assert inner.aborted  # the fleet's watchdog still reaches the real host


def _in_pty(args: list[str], **env: str) -> bytes:
    master, slave = pty.openpty()
    full = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    proc = subprocess.Popen([*CLI, *args], stdin=slave, stdout=slave, stderr=slave,
                            env={**full, "COLUMNS": "100", "TERM": "xterm-256color", **env})
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=60)
    os.close(master)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("args", [["status", "--help"], ["--help"], ["status", "--format"]])
def test_no_color_means_no_escape_sequences_on_a_terminal(args: list[str]) -> None:
    plain = _in_pty(args, NO_COLOR="1")
    assert not ANSI.search(plain), plain[:300]
    assert b"--format" in plain or b"Usage" in plain
    if args != ["status", "--format"]:
        assert ANSI.search(_in_pty(args)), "the pty test would not notice colour"


@pytest.mark.slow
def test_no_color_keeps_every_option_in_the_help() -> None:
    rich = _cli("status", "--help", COLUMNS="200").stdout
    plain = _cli("status", "--help", NO_COLOR="1").stdout
    for opt in ("--host", "--format", "--timeout", "--output"):
        assert opt in rich and opt in plain


@pytest.mark.slow
def test_shell_completion_script_and_live_completion() -> None:
    # --show-completion detects the calling shell; under CI that is bash (.ci/run).
    r = _cli("--show-completion")
    if r.returncode == 0:
        assert "_bsdcrypt_completion" in r.stdout and "_BSDCRYPT_COMPLETE=complete_" in r.stdout
    r = _cli(_BSDCRYPT_COMPLETE="complete_bash", COMP_WORDS="bsdcrypt an", COMP_CWORD="1")
    assert r.stdout.split() == ["analyze"]
    r = _cli(_BSDCRYPT_COMPLETE="complete_bash", COMP_WORDS="bsdcrypt status --ou", COMP_CWORD="2")
    assert r.stdout.split() == ["--output"]
    r = _cli(_BSDCRYPT_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS="bsdcrypt probe-")
    assert '"probe-script":"Print the read-only probe' in r.stdout
    r = _cli(_BSDCRYPT_COMPLETE="complete_fish", _TYPER_COMPLETE_ARGS="bsdcrypt fleet",
             _TYPER_COMPLETE_FISH_ACTION="get-args")
    assert r.stdout.startswith("fleet-audit\t")


@pytest.mark.slow
@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1"}])
def test_host_help_shows_user_at_with_and_without_rich(env: dict[str, str]) -> None:
    # rich markup would take `[user@]` for a style tag and drop it
    text = " ".join(_cli("status", "--help", COLUMNS="300", **env).stdout.replace("│", " ").split())
    assert "local (default), [user@]host[:port] over SSH, or replay:FILE|NAME" in text
    assert "\\[" not in text


def _complete_bash(*words: str, cword: int | None = None) -> list[str]:
    """What bash's completion function gets back, COMP_WORDS given as bash splits them (at colons
    too: COMP_WORDBREAKS) and joined by the script's IFS, a newline."""
    cword = len(words) - 1 if cword is None else cword
    r = _cli(_BSDCRYPT_COMPLETE="complete_bash", COMP_WORDS="\n".join(words), COMP_CWORD=str(cword))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return r.stdout.split()


SHIPPED = [line.split()[0] for line in _cli("recordings").stdout.splitlines() if line.strip()]  # NAME  description


@pytest.mark.slow
def test_format_values_complete() -> None:
    assert _complete_bash("bsdcrypt", "status", "--format", "") == ["table", "json", "yaml", "nagios", "prometheus",
                                                                    "html"]
    assert _complete_bash("bsdcrypt", "status", "-f", "n") == ["nagios"]
    assert _complete_bash("bsdcrypt", "fleet-audit", "--format", "c") == ["csv"]
    assert _complete_bash("bsdcrypt", "analyze", "-f", "") == ["table", "json", "yaml", "csv", "prometheus", "html"]
    assert _complete_bash("bsdcrypt", "fleet-audit", "-f", "h") == ["html"]
    assert _complete_bash("bsdcrypt", "bench", "--format", "") == ["table", "json", "yaml", "prometheus", "html"]


@pytest.mark.slow
def test_host_completes_local_and_shipped_recordings() -> None:
    assert len(SHIPPED) >= 15
    assert _complete_bash("bsdcrypt", "status", "--host", "lo") == ["local"]
    got = _complete_bash("bsdcrypt", "status", "-H", "")
    assert got[: len(SHIPPED) + 1] == ["local", *(f"replay:{n}" for n in SHIPPED)]
    assert all(v.startswith("replay:") and v.endswith(("/", ".yaml", ".yml")) for v in got[len(SHIPPED) + 1:])
    # `replay:free` as bash splits it; bash replaces only the text after the colon
    got = _complete_bash("bsdcrypt", "status", "--host", "replay", ":", "freebsd-13.0-hy")
    assert got == ["freebsd-13.0-hyperv-builtin"]
    got = _complete_bash("bsdcrypt", "record", "-o", "x.yaml", "--host", "replay", ":")
    assert got[: len(SHIPPED)] == SHIPPED  # right after the colon; then this folder's directories


@pytest.mark.slow
def test_option_equals_value_completes() -> None:
    """`--opt=VALUE`: bash splits at `=` too (COMP_WORDBREAKS) and replaces only the text after the last
    `=` or colon."""
    assert _complete_bash("bsdcrypt", "status", "--format", "=", "nag") == ["nagios"]
    assert _complete_bash("bsdcrypt", "status", "--format", "=", "") == ["table", "json", "yaml", "nagios",
                                                                         "prometheus", "html"]
    got = _complete_bash("bsdcrypt", "status", "--host", "=", "replay", ":", "freebsd-13.0-hy")
    assert got == ["freebsd-13.0-hyperv-builtin"]
    got = _complete_bash("bsdcrypt", "status", "--host", "=", "replay", ":")
    assert got[: len(SHIPPED)] == SHIPPED
    assert _complete_bash("bsdcrypt", "status", "--host", "=", "lo") == ["local"]


@pytest.mark.slow
def test_host_completes_recording_files(tmp_path: Path) -> None:
    (tmp_path / "recs").mkdir()
    (tmp_path / "recs" / "fw1.yaml").write_text("x")
    (tmp_path / "recs" / "notes.txt").write_text("x")
    got = _complete_bash("bsdcrypt", "status", "--host", "replay", ":", f"{tmp_path}/re")
    assert got == [f"{tmp_path}/recs/"]
    got = _complete_bash("bsdcrypt", "status", "--host", "replay", ":", f"{tmp_path}/recs/")
    assert got == [f"{tmp_path}/recs/fw1.yaml"]  # recordings are YAML: notes.txt is not offered


@pytest.mark.slow
def test_zsh_and_fish_complete_host_and_format() -> None:
    r = _cli(_BSDCRYPT_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS="bsdcrypt status --host replay:freebsd-13.0-hy")
    assert '"replay\\\\:freebsd-13.0-hyperv-builtin":"shipped recording"' in r.stdout
    r = _cli(_BSDCRYPT_COMPLETE="complete_fish", _TYPER_COMPLETE_ARGS="bsdcrypt status -f pro",
             _TYPER_COMPLETE_FISH_ACTION="get-args")
    assert r.stdout.startswith("prometheus\t")


@pytest.mark.slow
def test_show_completion_in_an_unsupported_shell_is_one_line_exit_3() -> None:
    cmd = " ".join(f"'{a}'" for a in CLI)
    r = subprocess.run(["sh", "-c", f"{cmd} --show-completion; exit $?"], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 3 and r.stdout == ""
    assert r.stderr.startswith("bsdcrypt: shell completion exists for bash") and r.stderr.count("\n") == 1


@pytest.mark.slow
def test_bash_script_keeps_going_after_replay_colon_and_directories() -> None:
    r = subprocess.run(["bash", "-c", f"{' '.join(repr(a) for a in CLI)} --show-completion; exit $?"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0
    assert "_BSDCRYPT_COMPLETE=complete_bash" in r.stdout and "compopt -o nospace" in r.stdout


def test_help_paragraphs_are_one_line_each() -> None:
    doc = """Load the driver now.

    Explains every no-op (compiled in,
    no AES-NI). Exit status: 0 done or
        nothing to do.
    """
    assert reflow(doc) == "Load the driver now.\n\nExplains every no-op (compiled in, no AES-NI). Exit status: 0 done or nothing to do."
