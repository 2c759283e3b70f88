"""JSON and YAML as every command writes them, and how a yes/no/unknown value reads in a table."""

from __future__ import annotations

import json
import json.encoder
from typing import Any

_STR = json.encoder.encode_basestring_ascii  # json's own (C) string encoder, as json.dumps uses it
_INF = float("inf")


class _NotPlain(Exception):
    """A value the fast writer leaves to json.dumps (a subclass, a non-str key, an unknown type)."""


def to_json(data: Any) -> str:
    """`json.dumps(data, indent=2)` and a newline, byte for byte (tests/test_serialize.py), written
    without json's pure-Python indenting generators (a fleet report holds a status per host). Anything
    but plain dicts with str keys, lists, tuples, str, int, float, bool and None goes to json.dumps."""
    out: list[str] = []
    try:
        _write(data, out, "\n")
    except _NotPlain:
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    out.append("\n")
    return "".join(out)


def _write(o: Any, out: list[str], nl: str) -> None:
    """Append `o` as JSON; `nl` is a newline and the indent of the line `o` starts on."""
    cls = o.__class__
    if cls is str:
        out.append(_STR(o))
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif cls is int:
        out.append(int.__repr__(o))
    elif cls is float:
        # as json.encoder's floatstr with allow_nan
        out.append("NaN" if o != o else "Infinity" if o == _INF else "-Infinity" if o == -_INF else float.__repr__(o))
    elif cls is dict:
        if not o:
            out.append("{}")
            return
        inner = nl + "  "
        sep = "{" + inner
        for key, value in o.items():
            if key.__class__ is not str:
                raise _NotPlain
            out.append(sep)
            out.append(_STR(key))
            out.append(": ")
            _write(value, out, inner)
            sep = "," + inner
        out.append(nl + "}")
    elif cls is list or cls is tuple:
        if not o:
            out.append("[]")
            return
        inner = nl + "  "
        sep = "[" + inner
        for value in o:
            out.append(sep)
            _write(value, out, inner)
            sep = "," + inner
        out.append(nl + "]")
    else:
        raise _NotPlain


def to_yaml(data: Any) -> str:
    import yaml  # loaded on first use: `status` in a table never needs it

    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000))


def dump(data: Any, fmt: str) -> str:
    """`json` or `yaml`."""
    return to_yaml(data) if fmt == "yaml" else to_json(data)


def yesno(value: object, unknown: str = "?") -> str:
    """yes / no / `unknown` for None; anything else as it is."""
    if value is None:
        return unknown
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
