"""`bench`'s jobs as subcommands (geli, userland, cleanup, compare) and the old flags that chose them;
issue 28's rough edges: cleanup on a system without md(4), compare on a folder of userland records,
userland's progress and its warning for a figure too noisy to trust."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bench_host import Md, ScriptedHost, speed_answer
from typer.testing import CliRunner

from bsdcrypt.bench.model import LABEL, HostFacts, UserlandResult, userland_record
from bsdcrypt.cli import app, register_commands
from bsdcrypt.cli.bench import job_args, without_foreign
from bsdcrypt.hostapi import RunResult

runner = CliRunner()
Cli = Callable[..., subprocess.CompletedProcess[Any]]


@pytest.fixture()
def host(monkeypatch: pytest.MonkeyPatch) -> ScriptedHost:
    h = ScriptedHost()
    monkeypatch.setattr("bsdcrypt.hosts.open.parse_host_spec", lambda spec, *_: h)
    monkeypatch.setattr("bsdcrypt.bench.facts.facts_for", lambda _h: None)
    monkeypatch.setattr("bsdcrypt.bench.cleanup.RETRY_DELAY_S", 0.0)
    register_commands()
    return h


@pytest.mark.parametrize(
    "args, job",
    [
        ([], ["geli"]),
        (["--repeat", "3", "-f", "json"], ["geli", "--repeat", "3", "-f", "json"]),
        (["--userland", "-f", "json"], ["userland", "-f", "json"]),
        (["-H", "h1", "--cleanup"], ["cleanup", "-H", "h1"]),
        (["-f", "html", "--compare", "a.json", "b.json"], ["compare", "-f", "html", "a.json", "b.json"]),
        (["compare", "a.json"], ["compare", "a.json"]),  # the new spelling as it is
        (["--help"], ["--help"]),  # the group's help: the jobs
        (["--compare", "--", "--userland"], ["compare", "--", "--userland"]),  # a record named like a flag
    ],
)
def test_the_old_flags_choose_the_same_job(args: list[str], job: list[str]) -> None:
    assert job_args(args) == job


def test_while_completing_bench_alone_offers_the_jobs() -> None:
    assert job_args([], completing=True) == []


def test_the_old_spelling_ignores_the_geli_options_as_it_did_the_new_one_refuses_them(host: ScriptedHost) -> None:
    mine = {"-H": True, "--host": True, "-f": True, "--format": True, "-o": True, "--output": True}
    geli = mine | {"--size": True, "--no-save": False, "--read": False, "--no-read": False}
    assert without_foreign(["--size", "512", "--no-save", "-f", "json", "--size=4", "--no-read"], mine, geli) == [
        "-f", "json"]
    res = runner.invoke(app, ["bench", "--cleanup", "--no-save", "--size", "512"])
    assert res.exit_code == 0 and res.stdout == "nothing to clean up\n", res.output
    res = runner.invoke(app, ["bench", "cleanup", "--no-save"])
    assert res.exit_code != 0 and "No such option: --no-save" in res.output


def test_two_old_flags_are_two_jobs_and_one_usage_error(host: ScriptedHost) -> None:
    res = runner.invoke(app, ["bench", "--userland", "--cleanup"])
    assert res.exit_code == 3 and res.stderr.count("\n") == 1
    assert "--cleanup and --userland are two jobs: give one" in res.stderr
    assert host.commands == []


def test_cleanup_on_a_system_without_md_is_one_clear_line(host: ScriptedHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: was `bench step 'preflight: leftovers' failed: `mdconfig -l -v` failed: sh: mdconfig: not found`."""
    scripted = host._execute

    def linux(kind: str, command: str) -> RunResult:  # uname prints Linux; `command -v mdconfig` nothing, exit 1
        return RunResult(1, b"Linux\n", b"") if kind == "system" else scripted(kind, command)

    monkeypatch.setattr(host, "_execute", linux)
    for spelling in (["bench", "cleanup"], ["bench", "--cleanup"], ["bench", "cleanup", "-f", "json"]):
        res = runner.invoke(app, spelling)
        assert res.exit_code == 3 and res.stdout == "", res.output
        assert res.stderr == (
            "bsdcrypt: scripted runs Linux, not FreeBSD, and has no mdconfig(8): bench makes md(4) and GELI "
            "devices only on FreeBSD-family systems, so it left none there; nothing to clean up\n"
        )
    assert set(host.commands) == {"uname -s; command -v mdconfig"}  # nothing else ran


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mdconfig") is not None, reason="this machine has md(4)")
def test_cleanup_here_on_linux_is_one_line(cli: Cli) -> None:
    """End to end on this (Linux) machine: the first command finds no mdconfig and nothing else runs."""
    r = cli("bench", "--cleanup")
    assert r.returncode == 3 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "runs Linux, not FreeBSD, and has no mdconfig(8)" in r.stderr, r.stderr


def test_cleanup_on_freebsd_still_removes_leftovers(host: ScriptedHost) -> None:
    host.md["md1"] = Md("swap", "1024m", LABEL)
    res = runner.invoke(app, ["bench", "cleanup"])
    assert res.exit_code == 0 and res.stdout == "cleanup removed md1\n", res.output
    assert host.commands[0] == "uname -s; command -v mdconfig" and host.leaked() == []


def _userland_record(folder: Path, name: str) -> None:
    u = UserlandResult("3.0.19", [], "AES-GCM", "Prefer AES-GCM")
    (folder / name).write_text(json.dumps(userland_record(u, HostFacts(hostname="h1"), "2026-12-06T11:00:00+00:00",
                                                          "2026-12-06T11:00:20+00:00")))


def test_compare_on_a_folder_of_userland_records_says_what_it_holds(tmp_path: Path) -> None:
    """Issue 28: was `DIR: no bench records (*.json) in this folder` with a userland record in it."""
    register_commands()
    for n in range(4):
        _userland_record(tmp_path, f"2026120{n}T110000-h1-userland.json")
    for spelling in (["bench", "compare", str(tmp_path)], ["bench", "--compare", str(tmp_path)]):
        res = runner.invoke(app, spelling)
        assert res.exit_code == 3 and res.stderr.count("\n") == 1, res.output
        assert res.stderr == (
            f"bsdcrypt: {tmp_path}: no GELI bench records to compare: it holds 4 bench userland records "
            "(20261200T110000-h1-userland.json, 20261201T110000-h1-userland.json, "
            "20261202T110000-h1-userland.json, ...), which have no GELI figures to chart; compare charts the "
            "records of `bsdcrypt bench` (geli) runs\n"
        )
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, ["bench", "compare", str(empty)])
    assert res.exit_code == 3 and f"{empty}: no bench records (*.json) in this folder" in res.stderr


def _answer_openssl(host: ScriptedHost, monkeypatch: pytest.MonkeyPatch, factors: list[float]) -> None:
    scripted = host._execute
    calls: list[str] = []

    def execute(kind: str, command: str) -> RunResult:
        if kind != "openssl":
            return scripted(kind, command)
        calls.append(command)
        return speed_answer(command, factors[(len(calls) - 1) % len(factors)])

    monkeypatch.setattr(host, "_execute", execute)


def test_userland_shows_progress_on_a_terminal_and_names_a_noisy_figure(
    host: ScriptedHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: was about 36 s with nothing on the terminal and no word when a run was too noisy."""
    _answer_openssl(host, monkeypatch, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5])
    monkeypatch.setattr("bsdcrypt.cli.bench.on_terminal", lambda: True)
    res = runner.invoke(app, ["bench", "userland", "--no-save"])
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    progress = [ln for ln in lines if ln.startswith("  openssl speed ")]
    assert len(progress) == 18 and progress[0].startswith("  openssl speed 1/18: aes-128-gcm (AES-NI masked), round 1/3: ")
    assert progress[-1].startswith("  openssl speed 18/18: chacha20-poly1305 (as it runs), round 3/3: ")
    # run 14 is round 3's second: aes-128-gcm as it runs (round 3 starts with the masked setting again)
    assert [ln for ln in lines if not ln.startswith("  ")] == [
        "bsdcrypt: warning: aes-128-gcm (as it runs) is too noisy to trust: its 3 runs spread 50% of their "
        "median (over 25%); run it again at a quieter moment"
    ]
    assert "aes-128-gcm" in res.stdout and "AES-NI masked" in res.stdout


def test_userland_off_a_terminal_prints_no_progress_and_the_warnings_go_into_json(
    host: ScriptedHost, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _answer_openssl(host, monkeypatch, [1.0] * 13 + [0.5])
    res = runner.invoke(app, ["bench", "--userland", "-f", "json", "--save", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "openssl speed" not in res.stderr and res.stderr.count("warning: ") == 1
    doc = json.loads(res.stdout)
    assert doc["rounds"] == 3 and len(doc["warnings"]) == 1 and "spread 50%" in doc["warnings"][0]
    record = json.loads(next(tmp_path.glob("*-userland.json")).read_text())
    assert record["warnings"] == doc["warnings"] and record["rounds"] == 3


@pytest.mark.slow
def test_bench_group_help_lists_the_jobs(cli: Cli) -> None:
    r = cli("bench", "--help", env={"NO_COLOR": "1", "COLUMNS": "120"})
    assert r.returncode == 0, r.stderr
    jobs = [ln.split()[0] for ln in r.stdout.split("Commands:\n", 1)[1].splitlines() if ln.startswith("  ")]
    assert jobs == ["geli", "userland", "cleanup", "compare"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "words, offered",
    [
        (["bench", ""], ["geli", "userland", "cleanup", "compare"]),
        (["bench", "cleanup", "-f", ""], ["table", "json", "yaml"]),
        (["bench", "--userland", "-f", ""], ["table", "json", "yaml", "html"]),
        (["bench", "compare", "--format", ""], ["table", "json", "yaml", "html"]),
        (["bench", "geli", "-f", "p"], ["prometheus"]),
    ],
)
def test_completion_offers_the_jobs_and_each_jobs_formats(cli: Cli, words: list[str], offered: list[str]) -> None:
    r = cli(env={"_BSDCRYPT_COMPLETE": "complete_bash", "COMP_WORDS": "\n".join(["bsdcrypt", *words]),
                 "COMP_CWORD": str(len(words))})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.split() == offered
