"""Recordings: dump/load round trip, redaction, replay, bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsdcrypt.errors import HostError
from bsdcrypt.host import LocalHost, parse_host_spec
from bsdcrypt.probe import Evidence, Step, gather
from bsdcrypt.recording import RecordingError, ReplayHost, dump, load, load_text, redact, resolve_recording


def test_round_trip_of_a_real_local_probe(tmp_path: Path) -> None:
    ev = gather(LocalHost())
    path = tmp_path / "me.yaml"
    path.write_text(dump(ev, "me"))
    doc, back = load(path)
    assert back.steps == ev.steps
    assert doc["host"] == "me" and doc["bsdcrypt_recording"] == 1


def test_non_utf8_and_crlf_survive(tmp_path: Path) -> None:
    ev = Evidence({"file:/boot/loader.conf": Step(0, b'aesni_load="YES"\r\n# caf\xe9\n'), "x": Step(2, b"a \n")})
    path = tmp_path / "r.yaml"
    path.write_text(dump(ev, "h"))
    assert load(path)[1].steps == ev.steps


def test_replay_answers_the_probe_like_the_host() -> None:
    ev = gather(LocalHost())
    replayed = gather(ReplayHost(ev, "me", "replay:x"))
    assert replayed.steps == ev.steps


def test_replay_refuses_other_commands() -> None:
    with pytest.raises(HostError, match="is a recording"):
        ReplayHost(Evidence(), "h", "replay:x").run("kldload aesni")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{{{", "not valid YAML"),
        ("just: a mapping\n", "not a bsdcrypt recording"),
        ("bsdcrypt_recording: 1\nsteps: [1, 2]\n", "'steps' must be a mapping"),
        ("bsdcrypt_recording: 1\nsteps:\n  a: {out: x}\n", "integer 'rc'"),
        ("bsdcrypt_recording: 1\nsteps:\n  a: {rc: 0, out_base64: '!!'}\n", "not valid base64"),
    ],
)
def test_bad_recordings_give_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(RecordingError, match=message):
        load_text(text, "bad.yaml")


def test_unknown_recording_name() -> None:
    with pytest.raises(RecordingError, match="no recording"):
        resolve_recording("no-such-host-anywhere")


def test_redaction_replaces_hostname_macs_and_serials() -> None:
    ev = Evidence(
        {
            "uname_a": Step(0, b"FreeBSD fw1.corp.example 13.2-RELEASE amd64\n"),
            "d": Step(0, b"em0: Ethernet address: 00:1b:21:3a:4f:9c\nada0: Serial Number WD-WCC4N1234567\n"),
            "geli_list": Step(0, b"Geom name: diskid/DISK-S3Z8NB0K123456X.eli\nName: gptid/4f1c2a3b-1d2e-11ee-9a7c-0cc47a1b2c3d\n"),
        }
    )
    out = redact(ev, "fw1.corp.example")
    text = b"".join(s.out for s in out.steps.values())
    assert b"fw1" not in text and b"00:1b:21:3a:4f:9c" not in text and b"WD-WCC4N1234567" not in text
    assert b"S3Z8NB0K123456X" not in text and b"diskid/DISK-REDACTED.eli" in text
    assert b"4f1c2a3b" not in text and b"gptid/00000000-0000-0000-0000-000000000000" in text
    assert b"Serial Number" in text


def test_redaction_replaces_whole_names_only() -> None:
    ev = Evidence({"a": Step(0, b"flags: vme vmx\nkern.vm_guest: kvm\nLinux vm 6.1 x86_64\nuser@vm:~$\n")})
    text = redact(ev, "vm").steps["a"].out
    assert text == b"flags: vme vmx\nkern.vm_guest: kvm\nLinux host.example 6.1 x86_64\nuser@host.example:~$\n"


def test_host_spec_replay_and_local() -> None:
    assert isinstance(parse_host_spec(None), LocalHost)
    assert isinstance(parse_host_spec("local"), LocalHost)
    with pytest.raises(RecordingError):
        parse_host_spec("replay:/nonexistent/file.yaml")
