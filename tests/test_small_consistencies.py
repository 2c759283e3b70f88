"""Issue 11 part 6: an unreachable host's JSON is a document; bench says when a host is not FreeBSD."""

from __future__ import annotations

import json
import platform
import socket
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

from bsdcrypt.bench.facts import not_freebsd
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.pipeline import status_of
from bsdcrypt.recording import resolve_recording

ROOT = Path(__file__).resolve().parent.parent


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


@pytest.mark.parametrize(
    ("recording", "refused"),
    [("linux-debian12-local", True), ("freebsd-13.0-hyperv-builtin", False), ("pfsense-2.4.5-i5-4590s-loaded", False),
     ("hardenedbsd-13.0-stable-epyc-builtin", False), ("opnsense-22.1-celeron-j4125-sha-only-builtin", False)],
)
def test_bench_refuses_only_hosts_that_are_not_freebsd(recording: str, refused: bool) -> None:
    status = status_of(ReplayHost.from_file(resolve_recording(recording)))
    why = not_freebsd(status)
    assert (why is not None) is refused
    if why:
        assert "runs Linux, not FreeBSD" in why and "md(4)" in why


@pytest.mark.slow
@pytest.mark.skipif(platform.system() != "Linux", reason="needs a machine that is not FreeBSD")
def test_bench_on_this_linux_machine_says_so() -> None:
    """Only the read-only probe runs before the refusal (no md, no GELI, no fio)."""
    r = run("bench", "--no-save")
    assert r.returncode == 3
    assert "runs Linux, not FreeBSD" in r.stderr and "preflight" not in r.stderr and r.stderr.count("\n") == 1
