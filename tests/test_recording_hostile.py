"""Issue 26: recordings are untrusted. Anchors and aliases refused before anything is composed (the alias
bomb), depth and size bounded, every field's type and size checked; one line (status), one row (analyze,
fleet-audit). Property tests: random YAML and random bytes end in a recording or one RecordingError line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.recording import MAX_DEPTH, MAX_EVENTS, RecordingError, load_text

ROOT = Path(__file__).resolve().parent.parent
STEP = 'steps:\n  uname_s:\n    rc: 0\n    out: "FreeBSD\\n"\n'


def bomb(levels: int = 9, width: int = 10) -> str:
    """The billion laughs: `levels` lists of `width` aliases of the one before, the last one as `host:`."""
    lines = ["bsdcrypt_recording: 1", "l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    lines.append(f"host: [{', '.join([f'*l{levels - 1}'] * width)}]")
    return "\n".join(lines) + "\n" + STEP


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=300)


def test_the_alias_bomb_is_small_and_refused_before_it_is_expanded() -> None:
    text = bomb()
    assert len(text) < 1200
    with pytest.raises(RecordingError, match=r"^x\.yaml: line 2: a YAML anchor \(&l0\): recordings never use"):
        load_text(text, "x.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["status", "analyze", "fleet-audit"])
def test_the_alias_bomb_is_one_line_or_one_row_everywhere(tmp_path: Path, command: str) -> None:
    rec = tmp_path / "bomb.yaml"
    rec.write_text(bomb())
    hosts = tmp_path / "hosts"
    hosts.write_text(f"replay:{rec}\nreplay:freebsd-13.0-hyperv-aesni-builtin\n")
    if command == "status":
        r = run("status", "-H", f"replay:{rec}")
        assert r.returncode == 3 and r.stdout == ""
        assert r.stderr.count("\n") == 1 and "a YAML anchor (&l0)" in r.stderr
    elif command == "analyze":
        r = run("analyze", str(rec), "-f", "csv")
        assert r.returncode == 3 and "Traceback" not in r.stderr
        (row,) = r.stdout.splitlines()[1:]
        assert "a YAML anchor (&l0)" in row
    else:
        r = run("fleet-audit", str(hosts), "-q", "-f", "csv")
        assert "Traceback" not in r.stderr, r.stderr
        rows = r.stdout.splitlines()[1:]
        assert len(rows) == 2 and "a YAML anchor (&l0)" in rows[0] and "YAML" not in rows[1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bsdcrypt_recording: 1\nhost: *nothing\n" + STEP, "a YAML alias (*nothing)"),  # an alias to no anchor
        ("bsdcrypt_recording: 1\nsource: &s x\n" + STEP, "a YAML anchor (&s)"),
        ("bsdcrypt_recording: 1\n" + STEP + "  x: &a {rc: 0, out: ''}\n  y: *a\n", "a YAML anchor (&a)"),
        ("bsdcrypt_recording: 1\n" + "host: " + "[" * 10_000 + "]" * 10_000 + "\n" + STEP,
         "line 2"),  # libyaml's own nesting limit, or ours: either way line 2 is refused
        ("bsdcrypt_recording: 1\n" + "host: " + "{a: " * 50_000 + "1" + "}" * 50_000 + "\n" + STEP, "line 2"),
        ("bsdcrypt_recording: 1\nhost: [[[[[1]]]]]\n" + STEP, f"nested deeper than a recording ({MAX_DEPTH} levels)"),
        ("bsdcrypt_recording: 1\nhost: [" + "1, " * (MAX_EVENTS + 10) + "1]\n" + STEP, f"more than {MAX_EVENTS} YAML"),
        (STEP + "bsdcrypt_recording: 1\n---\n" + STEP, "a second YAML document"),
        ("bsdcrypt_recording: 1\nhost: [1, 2]\n" + STEP, "'host' must be a string, not a list"),
        ("bsdcrypt_recording: 1\nhost: {a: 1}\n" + STEP, "'host' must be a string, not a mapping"),
        ("bsdcrypt_recording: 1\nhost: 12\n" + STEP, "'host' must be a string, not an integer"),
        ("bsdcrypt_recording: 1\nhost: !!binary aGVsbG8=\n" + STEP, "'host' must be a string, not binary data"),
        ("bsdcrypt_recording: 1\nrecorded_at: 2026-01-01T00:00:00Z\n" + STEP, "'recorded_at' must be a string"),
        ("bsdcrypt_recording: 1\nredacted: 'yes'\n" + STEP, "'redacted' must be true or false"),
        ("bsdcrypt_recording: 1\nhost: " + "h" * 5000 + "\n" + STEP, "'host' is 5000 characters long"),
        ("bsdcrypt_recording: 1\nsurprise: 1\n" + STEP, "unknown field surprise"),
        ("bsdcrypt_recording: 1.0\n" + STEP, "unsupported recording format '1.0'"),
        ("bsdcrypt_recording: true\n" + STEP, "unsupported recording format 'True'"),
        ("bsdcrypt_recording: 1\nsteps: [1]\n", "'steps' must be a mapping"),
        ("bsdcrypt_recording: 1\nsteps:\n  1: {rc: 0, out: x}\n", "a step name must be a string, not an integer"),
        ("bsdcrypt_recording: 1\nsteps:\n  \"a\\nb\": {rc: 0, out: x}\n", "is not a probe step name"),
        ("bsdcrypt_recording: 1\nsteps:\n  uname_s: {rc: true, out: x}\n", "needs an integer 'rc', not true/false"),
        ("bsdcrypt_recording: 1\nsteps:\n  uname_s: {rc: 99999, out: x}\n", "'rc' 99999 is not an exit status"),
        ("bsdcrypt_recording: 1\nsteps:\n  uname_s: {rc: 0, out: [1]}\n", "'out' must be a string, not a list"),
        ("bsdcrypt_recording: 1\nsteps:\n  uname_s: {rc: 0, out: \"\\ud800\"}\n", "line 3 is not valid YAML"),
        ("bsdcrypt_recording: 1\nsteps:\n  uname_s: {rc: 0, out_base64: 5}\n", "out_base64 must be a string"),
        ("bsdcrypt_recording: 1\nsteps:\n  uname_s: {rc: 0, out_base64: '!!'}\n", "out_base64 is not valid base64"),
        ("bsdcrypt_recording: 1\nsteps:\n  uname_s: {rc: 0, out: x, out_base64: eA==}\n", "both 'out' and"),
        ("bsdcrypt_recording: 1\nsteps:\n  uname_s: {rc: 0, out: x, extra: 1}\n", "unknown field extra"),
        ("bsdcrypt_recording: 1\nsteps:\n  uname_s: 5\n", "must be a mapping with 'rc' and 'out', not an integer"),
        ("bsdcrypt_recording: 1\nsteps:\n  x: !!python/object:os.system {}\n", "not valid YAML"),
    ],
)
def test_what_a_recording_never_holds_is_one_line(text: str, message: str) -> None:
    with pytest.raises(RecordingError) as exc:
        load_text(text, "r.yaml")
    line = str(exc.value)
    assert message in line and "\n" not in line and len(line) < 400 and line.startswith("r.yaml")


def test_a_recording_with_every_field_still_loads() -> None:
    text = (
        "bsdcrypt_recording: 1\ntool_version: 0.1.0\nrecorded_at: '2026-11-30T21:40:00Z'\nhost: h\nredacted: false\n"
        "description: d\nsource: s\nsteps:\n  uname_s:\n    rc: 0\n    out: |\n      FreeBSD\n"
        "  file:/boot/loader.conf:\n    rc: 0\n    out_base64: YWVzbmlfbG9hZD0iWUVTIgr/\n"
    )
    doc, ev = load_text(text, "r.yaml")
    assert doc["host"] == "h" and doc["redacted"] is False and doc["source"] == "s"
    assert ev.steps["uname_s"].out == b"FreeBSD\n" and ev.steps["file:/boot/loader.conf"].out.endswith(b"\xff")


# ---------------------------------------------------------------------------- property tests

_scalars = st.one_of(
    st.sampled_from(["1", "0", "true", "null", "~", "1.5", "0x10", "2026-01-01", "!!binary aGk=", "'s'", '"\\ud800"',
                     "*a", "*b", "&a x", "&b [1]", "!!set {a}", "!!python/name:os.system", "|\n  x", ">-\n  y"]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12).map(lambda t: yaml.safe_dump(t).split("\n")[0]),
)


def _nest(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(st.tuples(st.sampled_from(["rc", "out", "out_base64", "host", "a", "1", "uname_s"]), inner), max_size=4)
        .map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"),
        st.tuples(st.sampled_from(["&a ", "&b ", ""]), inner).map(lambda t: t[0] + t[1]),
    )


_values = st.recursive(_scalars, _nest, max_leaves=30)
_keys = st.sampled_from(["bsdcrypt_recording", "host", "source", "redacted", "steps", "recorded_at", "description",
                         "tool_version", "x"])


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(fields=st.lists(st.tuples(_keys, _values), max_size=8), deep=st.integers(min_value=0, max_value=3000))
def test_random_yaml_is_a_recording_or_one_line(fields: list[tuple[str, str]], deep: int) -> None:
    """Anchors, aliases, odd types and tags, deep flow nesting: a recording, or RecordingError (one line);
    never another exception, never an expansion."""
    text = "bsdcrypt_recording: 1\n" + "".join(f"{k}: {v}\n" for k, v in fields)
    if deep:
        text += "x: " + "[" * deep + "]" * deep + "\n"
    try:
        doc, ev = load_text(text, "r.yaml")
    except RecordingError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 1000
        return
    assert isinstance(doc["host"], str | None) and ev.steps


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400))
def test_random_bytes_are_a_recording_or_one_line(data: bytes) -> None:
    try:
        load_text(data.decode("utf-8", "replace"), "r.yaml")
    except RecordingError as exc:
        assert "\n" not in str(exc)
