"""bench/flow.py: the bench command's flow without the CLI (preflight, run, save), on the scripted host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_host import PARAMS, ScriptedHost

from bsdcrypt.bench import flow
from bsdcrypt.bench.facts import NotFreeBSD
from bsdcrypt.bench.model import HostFacts


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bsdcrypt.bench.cleanup.RETRY_DELAY_S", 0.0)


def test_a_run_is_saved_where_asked_and_returned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("bsdcrypt.bench.facts.facts_for", lambda _h: None)
    run = flow.run_measure(ScriptedHost(), PARAMS, save=str(tmp_path), no_save=False)
    assert run.saved.error is None and run.saved.path is not None and run.saved.path.parent == tmp_path
    assert json.loads(run.saved.path.read_text()) == json.loads(json.dumps(run.result.to_record()))


def test_an_unwritable_save_folder_keeps_the_result_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("bsdcrypt.bench.facts.facts_for", lambda _h: None)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    run = flow.run_measure(ScriptedHost(), PARAMS, save=str(blocker / "bench"), no_save=False)
    assert run.saved.path is None and run.saved.error is not None
    assert run.saved.error.startswith("could not save the record: ")
    assert run.result.measurements  # the measurements are not lost with the record
    assert blocker.read_text() == "not a folder\n"


def test_no_save_writes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("bsdcrypt.bench.facts.facts_for", lambda _h: None)
    run = flow.run_measure(ScriptedHost(), PARAMS, save=str(tmp_path), no_save=True)
    assert run.saved == flow.Saved() and list(tmp_path.iterdir()) == []


def test_the_geli_bench_refuses_a_system_without_geli_before_any_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_freebsd(_h: object) -> None:
        raise NotFreeBSD("Linux has no GELI or md(4)", HostFacts(hostname="l"))

    monkeypatch.setattr("bsdcrypt.bench.facts.facts_for", not_freebsd)
    host = ScriptedHost()
    with pytest.raises(NotFreeBSD, match="no GELI"):
        flow.run_measure(host, PARAMS, save=None, no_save=True)
    assert host.commands == []
