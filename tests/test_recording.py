"""Recordings: dump/load round trip, redaction, replay, bad files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.assess import assess
from bsdcrypt.errors import HostError
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.hosts.open import parse_host_spec
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.probe import Evidence, Step, gather
from bsdcrypt.recording import RecordingError, dump, load, load_text, resolve_recording
from bsdcrypt.redact import redact


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
        ("bsdcrypt_recording: 99\nsteps: {}\n", r"unsupported recording format 99 \(this bsdcrypt reads format 1\)"),
        ("bsdcrypt_recording: '1'\nsteps: {}\n", "unsupported recording format '1'"),
        ("bsdcrypt_recording: 1\nsteps: {}\n", "the recording has no probe steps"),
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
    ev = Evidence(
        {
            "uname_a": Step(0, b"Linux vm 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 x86_64 GNU/Linux\n"),
            "sysctl": Step(1, b"kern.hostname: vm\nkern.vm_guest: kvm\nsysctl: cannot stat /proc/sys/kern/vm_guest\n"),
            "linux_cpu_flags": Step(0, b"flags\t\t: fpu vme de vmx\n"),
        }
    )
    out = redact(ev, "vm").steps
    assert out["uname_a"].out.startswith(b"Linux host.example 6.1.0-18-amd64 ")
    assert out["sysctl"].out == (
        b"kern.hostname: host.example\nkern.vm_guest: kvm\nsysctl: cannot stat /proc/sys/kern/vm_guest\n"
    )
    assert out["linux_cpu_flags"] == ev.steps["linux_cpu_flags"]


HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
RECORDINGS = sorted(HOSTS.glob("*.yaml"))
# Host names that are also words of the probe's outputs: hypervisors, OS ids, kernel idents, arches, values.
COMMON_NAMES = [
    "kvm", "freebsd", "amd64", "GENERIC", "bhyve", "xen", "hv", "none", "generic", "i386", "aarch64", "arm64",
    "HARDENEDBSD", "SMP", "pfSense", "opnsense", "truenas", "debian", "linux", "kernel", "aesni", "YES", "NO",
    "zfs", "root", "nexus", "crypto", "software", "hardware", "ada0", "vtbd1", "host", "example", "FreeBSD",
]


def _named(ev: Evidence, name: str) -> Evidence:
    """The recording as it would read on a host called `name` (the shipped ones say host.example)."""
    steps = dict(ev.steps)
    if "sysctl" in steps:
        st = steps["sysctl"]
        steps["sysctl"] = Step(st.rc, st.out.replace(b"kern.hostname: host.example", b"kern.hostname: " + name.encode()))
    if "uname_a" in steps and steps["uname_a"].ok:
        st = steps["uname_a"]
        head, _, rest = st.out.partition(b" ")
        if rest.startswith(b"host.example "):
            steps["uname_a"] = Step(st.rc, head + b" " + name.encode() + rest[len(b"host.example"):])
    return Evidence(steps)


def _assessed(ev: Evidence, host: str) -> dict[str, object]:
    data = assess(ev, host, "replay:test").to_dict()
    data.pop("host")
    return data


@pytest.mark.slow
@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_redaction_keeps_the_assessment_whatever_the_host_is_called(path: Path) -> None:
    original = load(path)[1]
    for name in COMMON_NAMES:
        ev = _named(original, name)
        red = redact(ev, name)
        assert _assessed(red, "host.example") == _assessed(ev, name), name
        hostname = red.steps.get("sysctl")
        if hostname is not None and b"kern.hostname:" in hostname.out:
            assert b"kern.hostname: host.example\n" in hostname.out
        uname = red.steps.get("uname_a")
        if uname is not None and uname.ok:
            assert uname.out.split()[1] == b"host.example"


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(name=st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9-]{0,14}\Z"), index=st.integers(0, len(RECORDINGS) - 1))
def test_redaction_keeps_the_assessment_for_any_name(name: str, index: int) -> None:
    ev = _named(load(RECORDINGS[index])[1], name)
    assert _assessed(redact(ev, name), "host.example") == _assessed(ev, name)


def test_redaction_of_a_host_called_kvm_or_freebsd_keeps_the_words() -> None:
    ev = _named(load(HOSTS / "freebsd-15.0-kvm-aliyun-builtin.yaml")[1], "freebsd")
    ev = _named(redact(ev, "freebsd"), "kvm")
    red = redact(ev, "kvm")
    assert b"kern.vm_guest: kvm\n" in red.steps["sysctl"].out
    osr = red.steps["file:/var/run/os-release"].out
    assert b"ID=freebsd\n" in osr and b'CPE_NAME="cpe:/o:freebsd:freebsd:15.0"' in osr
    assert assess(red, "host.example", "t").cpu.hypervisor == "kvm"


def test_redaction_replaces_the_kernel_build_host_but_not_the_official_builders() -> None:
    ev = load(HOSTS / "freebsd-11.0-current-custom-kernel-x-no-aesni.yaml")[1]
    assert b"root@s4l-zfs:/usr/obj" in ev.steps["file:/var/run/dmesg.boot"].out
    red = redact(ev, "somewhere-else")
    dmesg = red.steps["file:/var/run/dmesg.boot"].out
    assert b"s4l-zfs" not in dmesg and b"root@host.example:/usr/obj" in dmesg
    official = load(HOSTS / "freebsd-13.0-hyperv-builtin.yaml")[1]
    assert redact(official, "x").steps["file:/var/run/dmesg.boot"] == official.steps["file:/var/run/dmesg.boot"]
    uname = Step(0, b"FreeBSD fw1 12.2-RELEASE FreeBSD 12.2-RELEASE #0: Thu Jan 1 00:00:00 UTC 2021     "
                 b"toor@build7.corp.example:/usr/obj/usr/src/amd64.amd64/sys/FW  amd64\n")
    out = redact(Evidence({"uname_a": uname}), "fw1").steps["uname_a"].out
    assert out == (b"FreeBSD host.example 12.2-RELEASE FreeBSD 12.2-RELEASE #0: Thu Jan 1 00:00:00 UTC 2021     "
                   b"toor@host.example:/usr/obj/usr/src/amd64.amd64/sys/FW  amd64\n")


def test_redaction_of_setting_hostname_and_loader_conf_comments() -> None:
    ev = Evidence(
        {
            "file:/var/run/dmesg.boot": Step(0, b"Setting hostname: fw1.corp.example.\nkvm0: kvm\n"),
            "file:/boot/loader.conf": Step(0, b'aesni_load="YES"  # fw1 needs it\nfw1_x="fw1"\n'),
        }
    )
    out = redact(ev, "fw1.corp.example").steps
    assert out["file:/var/run/dmesg.boot"].out == b"Setting hostname: host.example.\nkvm0: kvm\n"
    # issue 26: comments and the values bsdcrypt does not read are masked (tests/test_redact.py)
    assert out["file:/boot/loader.conf"].out == b'aesni_load="YES"  # redacted\nfw1_x="redacted"\n'


def test_host_spec_replay_and_local() -> None:
    assert isinstance(parse_host_spec(None), LocalHost)
    assert isinstance(parse_host_spec("local"), LocalHost)
    with pytest.raises(RecordingError):
        parse_host_spec("replay:/nonexistent/file.yaml")


def _record(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("record", "-o", "-", *args)


@pytest.mark.slow
def test_recording_a_replay_keeps_its_provenance() -> None:
    path = HOSTS / "freebsd-13.0-hyperv-builtin.yaml"
    original_text = path.read_text()
    original, evidence = load(path)
    r = _record("--host", "replay:freebsd-13.0-hyperv-builtin")
    assert r.returncode == 0, r.stderr
    doc, again = load_text(r.stdout, "out.yaml")
    assert again.steps == evidence.steps
    for key in ("recorded_at", "source", "tool_version", "host"):
        assert doc[key] == original[key], key
    assert doc["redacted"] is True
    first_header_line = original_text.splitlines()[0]
    assert r.stdout.startswith(first_header_line + "\n")
    assert "# re-recorded from a replay" in r.stdout


@pytest.mark.slow
def test_redacting_a_replay_of_an_unredacted_recording(tmp_path: Path) -> None:
    ev = Evidence(
        {
            "uname_s": Step(0, b"FreeBSD\n"),
            "uname_a": Step(0, b"FreeBSD fw1.corp.example 13.2-RELEASE FreeBSD 13.2-RELEASE GENERIC amd64\n"),
            "sysctl": Step(0, b"kern.hostname: fw1.corp.example\nkern.vm_guest: none\n"),
        }
    )
    src = tmp_path / "fw1.yaml"
    src.write_text(dump(ev, "fw1.corp.example"))
    recorded_at = load(src)[0]["recorded_at"]
    r = _record("--redact", "--host", f"replay:{src}")
    assert r.returncode == 0, r.stderr
    doc, red = load_text(r.stdout, "out.yaml")
    assert doc["redacted"] is True and doc["host"] == "host.example" and doc["recorded_at"] == recorded_at
    assert doc["source"] == "bsdcrypt record on host.example"
    assert "fw1" not in r.stdout
    again = tmp_path / "again.yaml"
    again.write_text(r.stdout)
    r2 = _record("--host", f"replay:{again}")  # recording the redacted copy keeps it redacted
    assert load_text(r2.stdout, "x")[0]["redacted"] is True and r2.stdout.count("# re-recorded from a replay") == 1


def test_dump_of_fresh_evidence_is_stamped_now() -> None:
    doc = load_text(dump(Evidence({"uname_s": Step(0, b"FreeBSD fresh\n")}), "h"), "x")[0]
    assert doc["source"] == "bsdcrypt record on h" and doc["redacted"] is False
    assert doc["recorded_at"] != "2025-01-01T00:00:00Z"
