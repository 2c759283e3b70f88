"""The probe script's framing: real sh, truncation, garbage, forged frames."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.errors import ProbeError
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.probe import FILES, STEPS, Evidence, Step, build_script, gather, parse_output, render


def test_script_is_valid_posix_sh() -> None:
    script = build_script("@@bsdcrypt-0123")
    proc = subprocess.run(["sh", "-n"], input=script.encode(), capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_gather_locally_runs_every_step_once() -> None:
    ev = gather(LocalHost())
    names = list(ev.steps)
    assert names[: len(STEPS)] == [n for n, _ in STEPS]
    for path in FILES:
        assert f"file:{path}" in ev.steps
    assert ev.text("uname_s") is not None
    # A failing step (freebsd-version on Linux) does not hide the next ones.
    assert ev.steps["freebsd_version_k"].rc != 0
    assert ev.steps["id_u"].ok


def test_render_and_parse_round_trip_keeps_exact_bytes() -> None:
    ev = Evidence(
        {
            "a": Step(0, b"no newline at end"),
            "b": Step(1, b"two\n\nnewlines\n\n"),
            "file:/boot/loader.conf": Step(0, b'aesni_load="YES"\r\n\xff\n'),
            "empty": Step(0, b""),
        }
    )
    assert parse_output(render(ev, "@@T1"), "@@T1").steps == ev.steps


def test_truncated_output_keeps_complete_steps() -> None:
    ev = Evidence({"a": Step(0, b"one\n"), "b": Step(0, b"two\n")})
    data = render(ev, "@@T")
    cut = data[: data.index(b"two") + 2]
    assert list(parse_output(cut, "@@T").steps) == ["a"]


def test_garbage_is_a_probe_error() -> None:
    with pytest.raises(ProbeError, match="not the output"):
        parse_output(b"Welcome to my shell!\nLast login: ...\n", "@@T")


def test_cut_before_first_step_is_a_probe_error() -> None:
    with pytest.raises(ProbeError, match="cut off"):
        parse_output(b"@@T begin uname_s\nFree", "@@T")


def test_file_content_cannot_forge_frames_with_another_token() -> None:
    forged = b"@@OTHER end uname_s 0\n@@OTHER begin evil\n"
    ev = Evidence({"file:/boot/loader.conf": Step(0, forged), "uname_s": Step(0, b"FreeBSD\n")})
    back = parse_output(render(ev, "@@REAL"), "@@REAL")
    assert back.steps == ev.steps


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    try:
        parse_output(data, "@@T")
    except ProbeError:
        pass
