"""JSON and YAML as every command writes them, and how a yes/no/unknown value reads in a table."""

from __future__ import annotations

import json
from typing import Any


def to_json(data: Any) -> str:
    """`data` as JSON indented by two spaces, and a newline (every command's JSON)."""
    return json.dumps(data, indent=2) + "\n"


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
