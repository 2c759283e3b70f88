"""`status` on a host that cannot be reached: its JSON and YAML are still a document, its table one line."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]


run = run_cli


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listened on: connecting to it is refused
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "load"), [("json", json.loads), ("yaml", yaml.safe_load)])
def test_an_unreachable_host_is_a_document_in_json_and_yaml(tmp_path: Path, fmt: str, load: object) -> None:
    port = _closed_port()
    r = run("status", "-H", f"127.0.0.1:{port}", "-f", fmt, "--timeout", "60")
    assert r.returncode == 3, r.stderr
    doc = load(r.stdout)  # type: ignore[operator]
    assert doc["schema"] == 1 and doc["verdict"] == "unknown"
    assert [f["id"] for f in doc["findings"]] == ["host-refused"]


@pytest.mark.slow
def test_an_unreachable_host_in_the_table_is_still_one_line() -> None:
    r = run("status", "-H", f"127.0.0.1:{_closed_port()}", "--timeout", "60")
    assert r.returncode == 3 and r.stdout == "" and r.stderr.count("\n") == 1
