"""Issue 29: enable/flow.py decides whether to read the loader files itself from a typed answer
(`loader.conf.uncollected`: the paths the loader may read that the probe did not collect), not from a
substring of a status message."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsdcrypt.enable import flow
from bsdcrypt.enable.plan import Plan
from bsdcrypt.hostapi import RunResult
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.loader.conf import files_from_evidence, uncollected
from bsdcrypt.loader.model import outcomes
from bsdcrypt.probe import Evidence, Step
from bsdcrypt.recording import load

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "hosts" / "freebsd-12.2-bhyve-not-loaded-overridden.yaml"


def _evidence(extra: dict[str, Step]) -> Evidence:
    ev = load(FIXTURE)[1]
    return Evidence({**ev.steps, **extra})


def test_a_named_file_the_probe_did_not_collect_is_uncollected() -> None:
    ev = _evidence({"file:/boot/loader.conf": Step(0, b'loader_conf_files="/boot/site.conf"\n')})
    outs = outcomes(files_from_evidence(ev), "aesni", 12)
    assert uncollected(ev, outs) == ["/boot/site.conf"]
    ev = _evidence({"file:/boot/loader.conf": Step(0, b'loader_conf_files="/boot/site.conf"\n'),
                    "file:/boot/site.conf": Step(0, b"")})
    assert uncollected(ev, outcomes(files_from_evidence(ev), "aesni", 12)) == []


def test_a_file_the_probe_would_not_read_is_uncollected() -> None:
    """Status 2 (a device, a FIFO, over 1 MiB): not "absent", so enable reads it itself and says why."""
    ev = _evidence({"file:/boot/loader.conf": Step(2, b"not a regular file (a device, FIFO or socket): not read\n")})
    assert uncollected(ev, outcomes(files_from_evidence(ev), "aesni", 12)) == ["/boot/loader.conf"]


class ExecReplay(ReplayHost):
    can_exec = True  # a host with a file system: enable may read its loader files

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        return super().run(command, input=input, timeout=timeout)


@pytest.mark.parametrize(("extra", "reads"), [
    ({}, False),
    ({"file:/boot/loader.conf": Step(0, b'loader_conf_files="/boot/site.conf"\n')}, True),
    ({"file:/boot/loader.conf": Step(2, b"larger than 1 MiB (5000000 bytes): not read\n")}, True),
])
def test_prepare_reads_the_loader_files_itself_only_when_some_were_not_collected(
    monkeypatch: pytest.MonkeyPatch, extra: dict[str, Step], reads: bool
) -> None:
    calls: list[str] = []

    def fake_read(host: object, root: str = "") -> list[tuple[str, bytes]]:
        calls.append(root)
        return [("/boot/loader.conf", b"")]

    monkeypatch.setattr("bsdcrypt.enable.remote.read_loader_files", fake_read)
    host = ExecReplay(_evidence(extra), "h", "replay:h")
    flow.prepare(host, flow.Request(plan_for=lambda inp, files: Plan(), dry_run=True))
    assert calls == ([""] if reads else [])
