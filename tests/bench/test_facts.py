"""bench/facts.py: the GELI bench runs only where the probe shows a FreeBSD-family system, and says so
in one line elsewhere (this Linux machine, end to end)."""

from __future__ import annotations

import platform

import pytest
from conftest import run_cli

from bsdcrypt.bench.facts import not_freebsd
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.pipeline import status_of
from bsdcrypt.recording import resolve_recording

run = run_cli


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
