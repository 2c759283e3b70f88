"""fleet-audit's `-t` covers every kind of host, replays included: a recording whose reading never ends
is one timeout row, and the other hosts of the run finish (issue 26)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bsdcrypt.fleet import FleetOptions, run_fleet
from bsdcrypt.fleet import run as fleet_run
from bsdcrypt.hosts import replay
from bsdcrypt.hostsfile import read_hosts

REPO = Path(__file__).resolve().parents[2]


def test_a_replay_that_never_loads_is_a_timeout_row_and_the_others_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = sorted((REPO / "fixtures" / "hosts").glob("*.yaml"))[0]
    (tmp_path / "good.yaml").write_text(rec.read_text())
    (tmp_path / "stuck.yaml").write_text(rec.read_text())
    release = threading.Event()
    real = replay.ReplayHost.from_file

    def from_file(path: Path) -> replay.ReplayHost:
        if Path(path).name == "stuck.yaml":  # a reading that abort cannot reach (a thread in C code)
            release.wait(60)
        return real(path)

    monkeypatch.setattr(replay.ReplayHost, "from_file", staticmethod(from_file))
    monkeypatch.setattr(fleet_run, "GRACE", 0.2)
    text = "replay:stuck.yaml\n" + "".join(f"replay:good.yaml\nroot@127.5.0.{i}:1\n" for i in range(1, 4))
    entries = read_hosts(text, "h", str(tmp_path))
    try:
        run = run_fleet(entries, FleetOptions(timeout=2, parallel=2))
    finally:
        release.set()
    kinds = {(r.entry.spec, r.error_kind) for r in run.results}
    assert ("replay:stuck.yaml", "timeout") in kinds, kinds
    stuck = next(r for r in run.results if r.entry.spec == "replay:stuck.yaml")
    assert "timed out after 2s" in (stuck.error or ""), stuck.error
    others = [r for r in run.results if r.entry.spec != "replay:stuck.yaml"]
    assert len(others) == 6
    assert all(r.error is None for r in others if r.entry.replay), [r.error for r in others]
    assert all(r.error_kind == "refused" for r in others if not r.entry.replay), [r.error for r in others]


def test_a_hosts_line_is_parsed_once_and_carried_to_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The typed spec of a hosts-file line reaches the SSH host as is: nothing parses the text again."""
    from bsdcrypt import hostspec
    from bsdcrypt.ssh import SSHHost

    entries = read_hosts("admin@[2001:db8::7]:2222\nfw1\n", "h", None)
    calls: list[str] = []
    real = hostspec.split_spec
    monkeypatch.setattr(hostspec, "split_spec", lambda text: calls.append(text) or real(text))
    hosts = [SSHHost.from_spec(e.ssh) for e in entries]
    assert calls == []
    assert [(h.alias, h.user, h.port, h.spec) for h in hosts] == [
        ("2001:db8::7", "admin", 2222, "admin@[2001:db8::7]:2222"), ("fw1", None, None, "fw1")]
