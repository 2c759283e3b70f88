"""Sanity checks for the whole-host recordings in fixtures/hosts/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bsdcrypt.probe import FILES, LOADER_CONF_DIR, MODULE_FILES, STEPS
from bsdcrypt.recording import load, shipped_names

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
    desc = doc.get("description")
    assert isinstance(desc, str) and desc.strip() and "\n" not in desc, "no one-line 'description'"
    unknown = sorted(s for s in evidence.steps if not _known(s))
    assert not unknown, f"unknown step names: {unknown}"
    missing = [s for s in REQUIRED if s not in evidence.steps]
    assert not missing, f"missing steps: {missing}"
    for name, step in evidence.steps.items():
        assert isinstance(step.rc, int), name


ROOT = HOSTS.parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "docs" / "bsdcrypt.8"])
# `replay:NAME` of a shipped recording; paths (with '/' or a .yaml/.yml suffix) are the user's own files.
_REPLAY = re.compile(r"replay:([A-Za-z0-9][\w.+-]*)")
_PLACEHOLDERS = {"FILE", "NAME", "PATH"}


def _named_recordings(text: str) -> set[str]:
    names = set()
    for m in _REPLAY.finditer(text):
        name = m.group(1).rstrip(".")
        following = text[m.end():m.end() + 1]
        if following == "/" or name.endswith((".yaml", ".yml")) or name in _PLACEHOLDERS:
            continue
        names.add(name)
    return names


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_replay_name_in_the_docs_is_a_shipped_recording(doc: Path) -> None:
    unknown = sorted(_named_recordings(doc.read_text(encoding="utf-8")) - set(shipped_names()))
    assert not unknown, f"{doc.name} names recordings that are not shipped: {unknown}"


def test_the_docs_scan_finds_names_and_skips_paths() -> None:
    text = "`replay:freebsd-12.2-kvm-not-loaded` replay:FILE replay:host.yaml replay:recordings/x.yaml replay:NAME."
    assert _named_recordings(text) == {"freebsd-12.2-kvm-not-loaded"}
    assert "freebsd-12.2-bhyve-not-loaded-overridden" in _named_recordings((ROOT / "README.md").read_text())


# A fixture names where its output came from as a public source or as `shared/real-outputs/...`, never as
# a path of the machine it was built on (which no reader has).
_MACHINE_PATH = re.compile(r"(?<![\w.-])/work/\S+|(?<![\w.-])/\S*/shared/real-outputs/")


def test_fixture_sources_name_no_path_of_the_machine_they_were_built_on() -> None:
    files = [p for p in (ROOT / "fixtures").rglob("*") if p.is_file()]
    assert len(files) > 100
    found = [
        f"{p.relative_to(ROOT)}:{n}: {m.group(0)}"
        for p in files
        for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if "source" in line.lower() or line.startswith("#")
        for m in [_MACHINE_PATH.search(line)]
        if m
    ]
    assert not found, found
