"""Issue 28: findings most severe first, everywhere (text, JSON, HTML, the fleet's rows).

assess() orders them once (status.by_severity): critical, unknown, warning, info, the verdict's ranking;
findings of one severity keep the order the rules gave them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bsdcrypt.collect.analyze import collect_file, to_status
from bsdcrypt.hosts.open import parse_host_spec
from bsdcrypt.pipeline import status_of
from bsdcrypt.recording import shipped_names
from bsdcrypt.render.status import render
from bsdcrypt.status import SEVERITY_RANK, Finding, Status, by_severity

ROOT = Path(__file__).resolve().parents[2]
PASTES = sorted((ROOT / "fixtures" / "pastes").glob("*.txt"))


def _ranks(status: Status) -> list[int]:
    return [SEVERITY_RANK[f.severity] for f in status.findings]


def test_by_severity_is_a_stable_sort() -> None:
    fs = [Finding("a", "info", "", ""), Finding("b", "warning", "", ""), Finding("c", "critical", "", ""),
          Finding("d", "warning", "", ""), Finding("e", "unknown", "", "")]
    assert [f.id for f in by_severity(fs)] == ["c", "e", "b", "d", "a"]
    assert [f.id for f in fs] == ["a", "b", "c", "d", "e"]  # a new list; the argument is left alone


@pytest.mark.parametrize("name", shipped_names())
def test_every_recording_lists_its_findings_most_severe_first(name: str) -> None:
    status = status_of(parse_host_spec(f"replay:{name}"))
    assert _ranks(status) == sorted(_ranks(status), reverse=True)


@pytest.mark.parametrize("path", PASTES, ids=lambda p: p.stem)
def test_every_paste_lists_its_findings_most_severe_first(path: Path) -> None:
    for collected in collect_file(str(path), path.read_bytes(), None):
        status = to_status(collected)
        assert _ranks(status) == sorted(_ranks(status), reverse=True)


def test_a_critical_finding_stands_above_a_warning_in_every_format() -> None:
    # the rules give not-persisted (warning) before geli-software (critical) for this host
    status = status_of(parse_host_spec("replay:freebsd-12.2-bhyve-geli-software-aesni-kldloaded"))
    assert [f.id for f in status.findings] == ["geli-software", "not-persisted"]
    table = render(status, "table")
    assert table.index("geli-software") < table.index("not-persisted")
    doc = json.loads(render(status, "json"))
    assert [f["id"] for f in doc["findings"]] == ["geli-software", "not-persisted"]
    assert render(status, "yaml").index("id: geli-software") < render(status, "yaml").index("id: not-persisted")
    page = render(status, "html")
    assert page.index("geli-software") < page.index("not-persisted")


def test_the_html_legend_of_shared_findings_is_most_severe_first() -> None:
    from bsdcrypt.render.html import finding_legend

    def host(*sevs: str) -> dict[str, object]:
        return {"findings": [{"id": f"f-{s}", "severity": s, "message": s, "remedy": ""} for s in sevs]}

    legend = finding_legend([host("warning", "unknown", "info", "critical")] * 2)
    assert [e["severity"] for e in legend] == ["critical", "unknown", "warning", "info"]
