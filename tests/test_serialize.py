"""render.serialize.to_json writes what `json.dumps(indent=2)` writes, byte for byte."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.pipeline import status_of
from bsdcrypt.render.serialize import to_json

ROOT = Path(__file__).resolve().parent.parent
HOSTS = sorted((ROOT / "fixtures" / "hosts").glob("*.yaml"))

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30,
)


def _dumps(data: Any) -> str:
    return json.dumps(data, indent=2) + "\n"


@settings(max_examples=300, deadline=None)
@given(_json)
def test_any_json_value_is_written_as_json_dumps_writes_it(data: Any) -> None:
    assert to_json(data) == _dumps(data)


@pytest.mark.parametrize("data", [
    {}, [], (), {"a": {}}, {"a": []}, [[], {}], "", "é\u2028\x00\x1b\"\\", float("nan"), float("inf"),
    -float("inf"), -0.0, 1e300, 2**80, -1, {"k": [1, [2, [3, {}]]]},
])
def test_edge_values(data: Any) -> None:
    assert to_json(data) == _dumps(data)


class _Color(enum.IntEnum):
    RED = 1


class _Text(str):
    pass


@pytest.mark.parametrize("data", [
    {1: "int key"}, {None: 1, True: 2, 1.5: 3}, [_Color.RED], {"a": _Text("sub")}, {"a": {"b": [_Color.RED]}},
])
def test_what_it_does_not_write_itself_goes_to_json_dumps(data: Any) -> None:
    assert to_json(data) == _dumps(data)


def test_what_json_dumps_refuses_is_refused() -> None:
    with pytest.raises(TypeError):
        to_json({"a": object()})


@pytest.mark.parametrize("path", HOSTS, ids=[p.stem for p in HOSTS])
def test_every_recording_status(path: Path) -> None:
    doc = status_of(ReplayHost.from_file(path)).to_dict()
    assert to_json(doc) == _dumps(doc)
