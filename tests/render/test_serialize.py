"""render.serialize: the JSON every command writes is the standard library's, indented by two spaces.

Issue 29 replaced a hand-written writer by `json.dumps(indent=2)` (docs/performance.md: 0.16 ms a host
at 5,000 hosts, which no user notices); what is tested here is what a reader of the JSON relies on.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.pipeline import status_of
from bsdcrypt.render.serialize import to_json, yesno

ROOT = Path(__file__).resolve().parents[2]
HOSTS = sorted((ROOT / "fixtures" / "hosts").glob("*.yaml"))

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_json)
def test_any_json_value_reads_back_the_same(data: Any) -> None:
    text = to_json(data)
    assert text.endswith("\n") and text.isascii()  # non-ASCII escaped: safe on any terminal encoding
    back = json.loads(text)
    assert back == data or (isinstance(data, float) and math.isclose(back, data))


def test_layout_is_two_space_indent() -> None:
    assert to_json({"a": [1, {"b": None}], "c": "é"}) == (
        '{\n  "a": [\n    1,\n    {\n      "b": null\n    }\n  ],\n  "c": "\\u00e9"\n}\n'
    )


@pytest.mark.parametrize("path", HOSTS, ids=[p.stem for p in HOSTS])
def test_every_recording_status_round_trips(path: Path) -> None:
    doc = status_of(ReplayHost.from_file(path)).to_dict()
    assert json.loads(to_json(doc)) == json.loads(json.dumps(doc))


def test_yesno_is_the_one_way_a_table_says_it() -> None:
    assert [yesno(True), yesno(False), yesno(None), yesno(None, "unknown"), yesno("3")] == [
        "yes", "no", "?", "unknown", "3"
    ]
