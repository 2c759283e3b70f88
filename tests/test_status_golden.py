"""Golden tests: every shipped recording -> the expected status JSON.

A change in any verdict, state or finding shows up as a diff of fixtures/golden/*.json in review.
Regenerate after an intended change with: BSDCRYPT_UPDATE_GOLDEN=1 python -m pytest tests/test_status_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.pipeline import status_of

ROOT = Path(__file__).resolve().parent.parent
HOSTS = sorted((ROOT / "fixtures" / "hosts").glob("*.yaml"))
GOLDEN = ROOT / "fixtures" / "golden"


def _status_json(path: Path) -> dict[str, object]:
    data = status_of(ReplayHost.from_file(path)).to_dict()
    data["source"] = f"replay:fixtures/hosts/{path.name}"
    return data


@pytest.mark.parametrize("path", HOSTS, ids=[p.stem for p in HOSTS])
def test_recording_matches_golden_status(path: Path) -> None:
    got = _status_json(path)
    golden = GOLDEN / f"{path.stem}.json"
    if os.environ.get("BSDCRYPT_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=2) + "\n")
    assert golden.exists(), f"no golden file for {path.name}; run with BSDCRYPT_UPDATE_GOLDEN=1 and review it"
    assert got == json.loads(golden.read_text())


def test_every_golden_file_has_a_recording() -> None:
    assert {p.stem for p in GOLDEN.glob("*.json")} <= {p.stem for p in HOSTS}


