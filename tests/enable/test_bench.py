"""`enable --bench`: measure before, kldload, re-probe, measure after, report the speedup.

A FreeBSD 12.2 host in miniature: the probe is answered from real recordings (not loaded before
kldload, loaded after), the bench commands by the ScriptedHost of test_bench.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from bench_host import ScriptedHost
from typer.testing import CliRunner

from bsdcrypt.hostapi import RunResult
from bsdcrypt.probe import PROBE_MAGIC, Step, render
from bsdcrypt.recording import load

HOSTS = Path(__file__).resolve().parents[2] / "fixtures" / "hosts"


def _evidence(name: str) -> object:
    ev = load(HOSTS / f"{name}.yaml")[1]
    ev.steps["id_u"] = Step(0, b"0\n")  # the admin runs enable as root
    return ev


@dataclass
class FreeBSDHost(ScriptedHost):
    kldloaded: bool = False

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        if PROBE_MAGIC in command:
            self.commands.append("<probe>")
            name = (
                "freebsd-12.2-bhyve-geli-software-aesni-kldloaded"
                if self.kldloaded
                else "freebsd-12.2-bhyve-not-loaded-overridden"
            )
            token = re.search(r"^T=(\S+)$", command, re.M).group(1)  # type: ignore[union-attr]
            return RunResult(0, render(_evidence(name), token))  # type: ignore[arg-type]
        if "kldload" in command and "aesni" in command:
            self.commands.append(command)
            self.kldloaded = True
            self.crypto = "hardware"  # 12.x: aesni registers as a hardware driver
            return RunResult(0, b"")
        if "dev.aesni.0.%desc" in command:
            self.commands.append(command)
            return RunResult(0, b"AES-CBC,AES-CCM,AES-GCM,AES-ICM,AES-XTS\n")
        return super().run(command, input=input, timeout=timeout)


@pytest.fixture(autouse=True)
def results_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """enable --bench saves its records where bench does by default: $XDG_DATA_HOME/bsdcrypt/bench."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr("bsdcrypt.bench.cleanup.RETRY_DELAY_S", 0.0)
    return tmp_path / "data" / "bsdcrypt" / "bench"


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> FreeBSDHost:
    h = FreeBSDHost(crypto="software")
    monkeypatch.setattr("bsdcrypt.hosts.open.parse_host_spec", lambda spec, *_: h)
    return h


def _app() -> object:
    from bsdcrypt.cli import app, register_commands

    register_commands()
    return app


def test_enable_bench_measures_before_and_after_the_kldload(host: FreeBSDHost) -> None:
    result = CliRunner().invoke(_app(), ["enable", "--bench", "--yes", "--host", "x"])  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    kld = next(i for i, c in enumerate(host.commands) if "kldload" in c)
    onetimes = [i for i, c in enumerate(host.commands) if c.removeprefix("exec ").startswith("geli onetime")]
    assert any(i < kld for i in onetimes) and any(i > kld for i in onetimes)
    assert host.commands.count("<probe>") == 2  # once to plan, once to describe the host after
    assert "software" in result.output and "hardware" in result.output
    assert host.leaked() == []


@pytest.mark.slow
def test_enable_bench_on_a_builtin_driver_reports_no_before(monkeypatch: pytest.MonkeyPatch) -> None:
    h = _builtin_host(monkeypatch)
    result = CliRunner().invoke(_app(), ["enable", "--bench", "--yes", "--host", "x"])  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    assert not any("kldload" in c for c in h.commands)
    assert sum(1 for c in h.commands if "geli onetime" in c) >= 1
    assert "before" in result.output.lower()
    assert h.leaked() == []


def _builtin_host(monkeypatch: pytest.MonkeyPatch, name: str = "freebsd-13.0-hyperv-builtin") -> FreeBSDHost:
    h = FreeBSDHost(crypto="accelerated software")
    ev = _evidence(name)

    def run(command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        if PROBE_MAGIC in command:
            token = re.search(r"^T=(\S+)$", command, re.M).group(1)  # type: ignore[union-attr]
            return RunResult(0, render(ev, token))  # type: ignore[arg-type]
        return ScriptedHost.run(h, command, input=input, timeout=timeout)

    h.run = run  # type: ignore[method-assign]
    monkeypatch.setattr("bsdcrypt.hosts.open.parse_host_spec", lambda spec, *_: h)
    return h


@pytest.mark.slow
def test_enable_bench_saves_both_records(host: FreeBSDHost, results_dir: Path) -> None:
    result = CliRunner().invoke(_app(), ["enable", "--bench", "--yes", "--host", "x"])  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    records = sorted(results_dir.glob("*.json"))
    assert len(records) == 2
    by_context = {json.loads(p.read_text())["context"]: json.loads(p.read_text()) for p in records}
    assert set(by_context) == {"enable --bench: before", "enable --bench: after"}
    assert by_context["enable --bench: before"]["crypto_mode"] == "software"
    assert by_context["enable --bench: after"]["crypto_mode"] == "hardware"
    for p in records:
        assert f"saved: {p}" in result.stdout


def test_enable_bench_json_is_one_document_with_the_bench(host: FreeBSDHost, results_dir: Path) -> None:
    result = CliRunner().invoke(
        _app(), ["enable", "--bench", "--yes", "--host", "x", "--format", "json"]  # type: ignore[arg-type]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # the whole of stdout: no table after the plan
    assert doc["plan"] and doc["host"]
    b = doc["bench"]
    assert b["before"]["crypto_mode"] == "software" and b["after"]["crypto_mode"] == "hardware"
    assert b["speedup"]["before_crypto"] == "software" and b["speedup"]["after_crypto"] == "hardware"
    assert b["speedup"]["no_before"] is None and b["speedup"]["ratio"]["write"] is not None
    assert len(b["saved"]) == 2 and b["errors"] == [] and b["interrupted"] is None
    assert "MiB/s" not in result.stdout and "█" not in result.stdout


def test_enable_bench_json_on_a_builtin_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    _builtin_host(monkeypatch)
    result = CliRunner().invoke(
        _app(), ["enable", "--bench", "--yes", "--host", "x", "-f", "json"]  # type: ignore[arg-type]
    )
    assert result.exit_code == 0, result.output
    b = json.loads(result.stdout)["bench"]
    assert b["before"] is None and b["after"] is not None
    assert "compiled into this kernel" in b["speedup"]["no_before"]


def test_no_before_when_the_before_measurement_failed_says_so(host: FreeBSDHost) -> None:
    host.has_fio = False  # fio installed only between the two runs: the "before" fails at preflight

    original = FreeBSDHost.run

    def run(command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        if "kldload" in command and "aesni" in command:
            host.has_fio = True
        return original(host, command, input=input, timeout=timeout)

    host.run = run  # type: ignore[method-assign]
    result = CliRunner().invoke(_app(), ["enable", "--bench", "--yes", "--host", "x"])  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    assert "pkg install fio" in result.stderr
    assert "the 'before' measurement failed at step 'preflight: fio'" in result.stdout
    assert "compiled" not in result.stdout


def test_no_before_when_the_driver_was_already_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    _builtin_host(monkeypatch, "freebsd-12.2-bhyve-geli-software-aesni-kldloaded")
    result = CliRunner().invoke(_app(), ["enable", "--bench", "--yes", "--host", "x"])  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    assert "already loaded (kldload)" in result.stdout
    assert "compiled" not in result.stdout


def test_no_before_when_enable_only_persists(monkeypatch: pytest.MonkeyPatch) -> None:
    _builtin_host(monkeypatch, "freebsd-12.2-bhyve-geli-software-aesni-kldloaded")
    written: list[object] = []
    monkeypatch.setattr("bsdcrypt.enable.act.perform", lambda host, plan, **kw: written.append(plan))
    monkeypatch.setattr("bsdcrypt.enable.remote.read_loader_files", lambda host, root: [])
    monkeypatch.setattr("bsdcrypt.enable.remote.real_paths", lambda host, paths, root: {p: p for p in paths})
    result = CliRunner().invoke(
        _app(), ["enable", "--persist", "--bench", "--yes", "--host", "x"]  # type: ignore[arg-type]
    )
    assert result.exit_code == 0, result.output
    assert written and 'aesni_load="YES"' in result.stdout  # the plan only writes loader.conf
    assert "nothing was loaded now, only persisted for the next boot" in result.stdout
    assert "compiled" not in result.stdout


@pytest.mark.parametrize("phase", ["before", "after"])
def test_ctrl_c_during_enable_bench_reports_cleanup_and_exits_130(host: FreeBSDHost, phase: str) -> None:
    original = FreeBSDHost.run
    seen = {"fio": 0}

    def run(command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        if command.startswith("exec fio "):
            seen["fio"] += 1
            if (phase == "before" and seen["fio"] == 1) or (phase == "after" and host.kldloaded):
                host.commands.append(command)
                raise KeyboardInterrupt
        return original(host, command, input=input, timeout=timeout)

    host.run = run  # type: ignore[method-assign]
    result = CliRunner().invoke(_app(), ["enable", "--bench", "--yes", "--host", "x"])  # type: ignore[arg-type]
    assert result.exit_code == 130, result.output
    assert "bench interrupted (Ctrl-C) during step 'fio write on md1.eli'" in result.stderr
    assert "cleanup removed md1.eli, md1" in result.stderr
    if phase == "before":
        assert "nothing was changed" in result.stderr
        assert not any("kldload" in c for c in host.commands)
    else:
        assert "the driver IS loaded now (kldload ran)" in result.stderr
    assert host.leaked() == []


def test_ctrl_c_during_enable_bench_json_still_prints_one_document(host: FreeBSDHost) -> None:
    original = FreeBSDHost.run

    def run(command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        if command.startswith("exec fio ") and host.kldloaded:
            raise KeyboardInterrupt
        return original(host, command, input=input, timeout=timeout)

    host.run = run  # type: ignore[method-assign]
    result = CliRunner().invoke(
        _app(), ["enable", "--bench", "--yes", "--host", "x", "-f", "json"]  # type: ignore[arg-type]
    )
    assert result.exit_code == 130
    b = json.loads(result.stdout)["bench"]
    assert b["before"] is not None and b["after"] is None
    assert "bench interrupted" in b["interrupted"] and "kldload ran" in b["interrupted"]
