"""`enable --bench`: measure before, kldload, re-probe, measure after, report the speedup.

A FreeBSD 12.2 host in miniature: the probe is answered from real recordings (not loaded before
kldload, loaded after), the bench commands by the ScriptedHost of test_bench.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_bench import ScriptedHost
from typer.testing import CliRunner

from bsdcrypt.host import RunResult
from bsdcrypt.probe import PROBE_MAGIC, Step, render
from bsdcrypt.recording import load

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"


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


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> FreeBSDHost:
    h = FreeBSDHost(crypto="software")
    monkeypatch.setattr("bsdcrypt.host.parse_host_spec", lambda spec: h)
    return h


def _app() -> object:
    from bsdcrypt.cli import _register_commands, app

    _register_commands()
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


def test_enable_bench_on_a_builtin_driver_reports_no_before(monkeypatch: pytest.MonkeyPatch) -> None:
    h = FreeBSDHost(crypto="accelerated software")
    ev = _evidence("freebsd-13.0-hyperv-builtin")

    def run(command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        if PROBE_MAGIC in command:
            token = re.search(r"^T=(\S+)$", command, re.M).group(1)  # type: ignore[union-attr]
            return RunResult(0, render(ev, token))  # type: ignore[arg-type]
        return ScriptedHost.run(h, command, input=input, timeout=timeout)

    h.run = run  # type: ignore[method-assign]
    monkeypatch.setattr("bsdcrypt.host.parse_host_spec", lambda spec: h)
    result = CliRunner().invoke(_app(), ["enable", "--bench", "--yes", "--host", "x"])  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    assert not any("kldload" in c for c in h.commands)
    assert sum(1 for c in h.commands if "geli onetime" in c) >= 1
    assert "before" in result.output.lower()
    assert h.leaked() == []
