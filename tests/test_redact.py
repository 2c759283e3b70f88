"""Issue 26: `record --redact` keeps only what bsdcrypt's own reading of a host needs (docs/recordings.md):
loader values it does not read, comments, addresses and host names are masked; twice is once; the redacted
recording replays to the same status."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.assess import assess
from bsdcrypt.parsers.loaderconf import parse
from bsdcrypt.probe import Evidence, Step
from bsdcrypt.recording import load, load_text
from bsdcrypt.redact import REDACTED_HOST, kept_variables, mask_loader_file, redact

ROOT = Path(__file__).resolve().parent.parent
HOSTS = ROOT / "fixtures" / "hosts"
RECORDINGS = sorted(HOSTS.glob("*.yaml"))

LOADER = (
    b'# fw1-prod: the vault box, root pw is hunter2\r\n'
    b'aesni_load="YES" # bsdcrypt enable: was=NO\r\n'
    b'zfs_load="YES" # needed by pool tank-fw1-prod\r\n'
    b'password="hunter2"\r\n'
    b'bootlock_password="s3cret"\r\n'
    b'kern.geom.eli.passphrase="correct horse"\r\n'
    b'geli_ada0p4_keyfile0_load="YES"\r\n'
    b'geli_ada0p4_keyfile0_type="ada0p4:geli_keyfile0"\r\n'
    b'geli_ada0p4_keyfile0_name="/boot/keys/fw1-prod.key"\r\n'
    b'exec="echo hunter2"\r\n'
    b'mine="drm ${site}"\r\n'
    b'site="aesni"\r\n'
    b'module_blacklist="${mine}"\r\n'
    b'aesni_name="aesni"\r\n'
    b'ifconfig_em0=10.1.2.3\r\n'
    b'hunter2 is the password\r\n'
    b'\r\n'
    b'loader_conf_files="/boot/fw1-prod.conf"'
)


def test_loader_secrets_are_masked_and_what_bsdcrypt_reads_is_kept() -> None:
    kept = kept_variables([LOADER])
    assert {"mine", "site", "module_blacklist", "loader_conf_files"} <= kept and "password" not in kept
    out = mask_loader_file(LOADER, kept)
    assert out.count(b"\n") == LOADER.count(b"\n") and out.count(b"\r\n") == LOADER.count(b"\r\n")
    lines = out.split(b"\r\n")
    assert lines == [
        b"# redacted",
        b'aesni_load="YES" # bsdcrypt enable: was=NO',  # enable's marker: disable needs it
        b'zfs_load="YES" # redacted',
        b'password="redacted"',
        b'bootlock_password="redacted"',
        b'kern.geom.eli.passphrase="redacted"',
        b'geli_ada0p4_keyfile0_load="YES"',
        b'geli_ada0p4_keyfile0_type="redacted"',
        b'geli_ada0p4_keyfile0_name="redacted"',
        b'exec="redacted"',
        b'mine="drm ${site}"',  # named by module_blacklist's value: the loader expands it
        b'site="aesni"',
        b'module_blacklist="${mine}"',
        b'aesni_name="aesni"',
        b"ifconfig_em0=redacted",
        b"redacted line",  # a malformed line stays malformed, its text goes
        b"",
        b'loader_conf_files="/boot/fw1-prod.conf"',
    ]
    for secret in (b"hunter2", b"s3cret", b"correct horse", b"fw1-prod.key", b"10.1.2.3", b"vault"):
        assert secret not in out
    assert [(ln.number, ln.kind) for ln in parse(out)] == [(ln.number, ln.kind) for ln in parse(LOADER)]
    assert mask_loader_file(out, kept_variables([out])) == out


def _evidence() -> Evidence:
    return Evidence({
        "uname_a": Step(0, b"FreeBSD fw1-prod.corp.example 14.1-RELEASE FreeBSD 14.1-RELEASE GENERIC amd64\n"),
        "sysctl": Step(0, b"kern.hostname: fw1-prod.corp.example\nkern.vm_guest: kvm\n"),
        "file:/boot/loader.conf": Step(0, LOADER),
        "file:/boot/fw1-prod.conf": Step(0, b'aesni_load="YES"\n'),
        "file:/var/run/dmesg.boot": Step(0, (
            b"em0: Ethernet address: 00:1b:21:3a:4f:9c\nem0: link state changed to UP, inet 10.20.30.40 netmask "
            b"255.255.255.0\ninet6 fe80::1%em0 prefixlen 64 and 2a01:4f8:1c1c::5\nlo0: 127.0.0.1 ::1\n"
            b"mpr0: Firmware: 316.1.2.3, Driver 1.2.3\nCalibrating clock at 12:34:56 ...\n"
            b"NFS root from 192.168.1.5:/exports/fw1-prod\n"
        )),
    })


def _reading(ev: Evidence) -> object:
    data = assess(ev, REDACTED_HOST, "t").to_dict()
    data.pop("host")
    return data


def test_addresses_and_names_are_masked_in_every_step() -> None:
    red = redact(_evidence(), "fw1-prod.corp.example", _reading)
    dmesg = red.steps["file:/var/run/dmesg.boot"].out
    assert b"10.20.30.40" not in dmesg and b"192.168.1.5" not in dmesg and b"inet 192.0.2.1 netmask 255.255.255.0" in dmesg
    assert b"fe80::1" not in dmesg and b"2a01:4f8" not in dmesg and b"inet6 2001:db8::1 prefixlen" in dmesg
    assert b"lo0: 127.0.0.1 ::1\n" in dmesg  # loopback names nobody
    assert b"316.1.2.3, Driver 1.2.3" in dmesg and b"12:34:56" in dmesg  # versions and times are not addresses
    assert b"/exports/host.example" in dmesg
    everything = b"".join(k.encode() + s.out for k, s in red.steps.items())
    assert b"fw1-prod" not in everything and b"00:1b:21" not in everything
    assert "file:/boot/host.example.conf" in red.steps  # a name inside a path, step names included
    assert b'loader_conf_files="/boot/host.example.conf"' in red.steps["file:/boot/loader.conf"].out
    assert _reading(red) == _reading(_evidence())


def test_without_a_reading_names_are_replaced_only_in_their_places() -> None:
    red = redact(_evidence(), "fw1-prod.corp.example")
    assert b"kern.hostname: host.example\n" in red.steps["sysctl"].out
    assert "file:/boot/fw1-prod.conf" in red.steps


def test_a_name_that_would_change_the_reading_stays_in_other_places() -> None:
    """A host called `kvm`: kern.vm_guest must stay kvm, so the name is replaced only where it is the name."""
    ev = Evidence({
        "sysctl": Step(0, b"kern.hostname: kvm\nkern.vm_guest: kvm\n"),
        "uname_s": Step(0, b"FreeBSD\n"),
    })
    red = redact(ev, "kvm", _reading)
    assert red.steps["sysctl"].out == b"kern.hostname: host.example\nkern.vm_guest: kvm\n"


def _named(ev: Evidence, name: str) -> Evidence:
    steps = dict(ev.steps)
    st_ = steps.get("sysctl")
    if st_ is not None:
        steps["sysctl"] = Step(st_.rc, st_.out.replace(b"kern.hostname: host.example", b"kern.hostname: " + name.encode()))
    return Evidence(steps)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_every_shipped_recording_redacts_to_the_same_reading_and_twice_is_once(path: Path) -> None:
    ev = _named(load(path)[1], "web-07")
    red = redact(ev, "web-07", _reading)
    assert _reading(red) == _reading(ev)
    assert redact(red, REDACTED_HOST, _reading).steps == red.steps
    assert not any(b"web-07" in s.out for s in red.steps.values())


@pytest.mark.slow
def test_record_redact_twice_gives_the_same_file(tmp_path: Path) -> None:
    def record(*args: str) -> str:
        r = run_cli("record", "-o", "-", "--redact", *args, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout

    src = tmp_path / "fw1.yaml"
    from bsdcrypt.recording import dump

    src.write_text(dump(_evidence(), "fw1-prod.corp.example"))
    once = record("--host", f"replay:{src}")
    assert "hunter2" not in once and "fw1-prod" not in once and "10.20.30.40" not in once
    first = tmp_path / "once.yaml"
    first.write_text(once)
    twice = record("--host", f"replay:{first}")
    assert load_text(twice, "t")[1].steps == load_text(once, "t")[1].steps
    status = [run_cli("status", "-H", f"replay:{p}", "-f", "json", timeout=300) for p in (src, first)]
    import json

    docs = [json.loads(s.stdout) for s in status]
    for d in docs:
        d.pop("host")
        d.pop("source")
    assert docs[0] == docs[1]


_line = st.one_of(
    st.sampled_from([b"", b"\r", b"# c", b"  # c\r", b'aesni_load="YES"', b'x="y" # z', b"junk", b'a=b # bsdcrypt enable: added',
                     b'module_blacklist="${q}"', b'q="v"', b"exec=\"x\"", b'p="a"b"', b"=\"\""]),
    st.binary(max_size=30),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_line, max_size=12), final=st.booleans())
def test_masking_any_loader_file_keeps_its_lines_and_is_idempotent(lines: list[bytes], final: bool) -> None:
    data = b"\n".join(lines) + (b"\n" if final else b"")
    kept = kept_variables([data])
    out = mask_loader_file(data, kept)
    assert [(ln.number, ln.kind, ln.name) for ln in parse(out)] == [(ln.number, ln.kind, ln.name) for ln in parse(data)]
    assert [ln.value for ln in parse(out) if ln.name in kept or (ln.name or "").endswith("_load")] == [
        ln.value for ln in parse(data) if ln.name in kept or (ln.name or "").endswith("_load")
    ]
    assert mask_loader_file(out, kept_variables([out])) == out


@pytest.mark.slow
def test_a_replayed_recordings_header_and_source_are_masked_too(tmp_path: Path) -> None:
    from bsdcrypt.recording import dump

    src = tmp_path / "fw1.yaml"
    src.write_text(dump(_evidence(), "fw1-prod.corp.example", comment="ssh root@10.20.30.40 from fe80::1%em0"))
    r = run_cli("record", "-o", "-", "--redact", "--host", f"replay:{src}", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "10.20.30.40" not in r.stdout and "fe80::1" not in r.stdout and "fw1-prod" not in r.stdout
    assert "ssh root@192.0.2.1 from 2001:db8::1" in r.stdout
