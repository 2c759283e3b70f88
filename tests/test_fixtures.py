"""Sanity checks for the whole-host recordings in fixtures/hosts/."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsdcrypt.probe import FILES, LOADER_CONF_DIR, MODULE_FILES, STEPS
from bsdcrypt.recording import load

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
RECORDINGS = sorted(HOSTS.glob("*.yaml"))

KNOWN = {name for name, _ in STEPS} | {f"file:{p}" for p in FILES} | {f"exists:{p}" for p in MODULE_FILES}
REQUIRED = ("uname_s", "sysctl", "file:/var/run/dmesg.boot", "kldstat_v", "kldstat_m:aesni")


def _known(step: str) -> bool:
    if step in KNOWN:
        return True
    prefix = f"file:{LOADER_CONF_DIR}/"
    return step.startswith(prefix) and step.endswith(".conf") and "/" not in step[len(prefix):]


def test_there_are_enough_recordings() -> None:
    assert len(RECORDINGS) >= 16


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_recording(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert any(line.startswith("# source:") for line in text.splitlines()[:5]), "missing '# source:' header"
    doc, evidence = load(path)
    assert isinstance(doc.get("source"), str) and doc["source"].strip(), "empty 'source'"
    unknown = sorted(s for s in evidence.steps if not _known(s))
    assert not unknown, f"unknown step names: {unknown}"
    missing = [s for s in REQUIRED if s not in evidence.steps]
    assert not missing, f"missing steps: {missing}"
    for name, step in evidence.steps.items():
        assert isinstance(step.rc, int), name
