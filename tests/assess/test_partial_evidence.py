"""Partial evidence only ever moves the report toward unknown, never to a wrong certainty.

For every shipped recording, each probe step is dropped in turn (the command not run, the file not
collected) and the report is compared with the full one: every field is either the same or unknown,
no finding that asserts something (anything but the `unknown`-severity ones) appears that the full
evidence does not give, and the verdict is the full one or `unknown`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bsdcrypt.assess import assess
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.probe import Evidence
from bsdcrypt.status import Status

HOSTS = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "hosts").glob("*.yaml"))
UNKNOWN = (None, "unknown")


@cache
def _evidence(path: Path) -> Evidence:
    return ReplayHost.from_file(path).evidence  # parsed once per recording (YAML is the slow part)


@cache
def _full(path: Path) -> Status:
    return assess(_evidence(path), "h", "replay:x")


def _fields(s: Status) -> dict[str, Any]:
    d, p, c, o = s.driver, s.persist, s.cpu, s.os
    out: dict[str, Any] = {
        "os.release": o.release, "os.arch": o.arch, "os.major": o.major,
        "cpu.aesni": c.aesni, "cpu.sha": c.sha, "cpu.vm": c.vm,
        "driver.state": d.state, "driver.attached": d.attached, "driver.accelerates_aes": d.accelerates_aes,
        "driver.compiled_in": d.compiled_in, "driver.in_generic": d.in_generic,
        "persist.configured": p.configured, "persist.needed": p.needed,
    }
    for g in s.geli:
        out[f"geli.{g.name}.accelerated"] = g.accelerated
        out[f"geli.{g.name}.accelerable"] = g.accelerable
    return out


def _asserting(s: Status) -> set[str]:
    return {f.id for f in s.findings if f.severity != "unknown"}


CASES = [(path, step) for path in HOSTS for step in _evidence(path).steps]


@pytest.mark.parametrize("path,step", CASES, ids=[f"{p.stem}-{s}" for p, s in CASES])
def test_dropping_a_step_only_moves_toward_unknown(path: Path, step: str) -> None:
    ev = _evidence(path)
    full = _full(path)
    partial = assess(Evidence({k: v for k, v in ev.steps.items() if k != step}), "h", "replay:x")
    want, got = _fields(full), _fields(partial)
    for key, value in got.items():
        if key.startswith("geli.") and key not in want:
            pytest.fail(f"without {step}: a GELI provider appeared that the full evidence does not show: {key}")
        assert value in UNKNOWN or value == want[key], f"without {step}: {key} {want.get(key)!r} -> {value!r}"
    new = _asserting(partial) - {f.id for f in full.findings}
    assert not new, f"without {step}: findings the full evidence does not give: {sorted(new)}"
    assert partial.verdict in (full.verdict, "unknown"), f"without {step}: verdict {full.verdict} -> {partial.verdict}"


def test_the_property_is_checked_over_many_steps() -> None:
    # every recording contributes its steps: a renamed fixture folder would leave this test empty
    assert len(HOSTS) >= 20 and len(CASES) >= 20 * 15
