from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.parsers.sysctl import parse_sysctl, unknown_oids

from ._load import load, names

# fixture -> (number of entries, {name: value} that must be present, unknown oids)
CASES: dict[str, tuple[int, dict[str, str], list[str]]] = {
    "gehaowu-9.2-i386-sysctl-a-grep-cpu-xeon5130.txt": (7, {
        "hw.model": "Intel(R) Xeon(R) CPU            5130  @ 2.00GHz",
        "dev.cpu.0.%desc": "ACPI CPU",
        "dev.cpu.1.%location": "handle=\\_PR_.CPU2",
    }, []),
    "hyperv-13.0-timecounter-eventtimer.txt": (41, {
        "kern.timecounter.hardware": "Hyper-V-TSC",
        "kern.timecounter.tc.TSC-low.quality": "-100",
        "kern.eventtimer.choice": "Hyper-V(1000) LAPIC(100) RTC(0)",
    }, []),
    "lnz-2010-i386-p4-egrep-html-br.txt": (4, {
        "hw.machine": "i386",
        "hw.model": "Intel(R) Pentium(R) 4 CPU 2.40GHz",
        "hw.ncpu": "1",
        "hw.machine_arch": "i386",
    }, []),
    "rpi3bplus-12.2-arm64-sysctl-selection.txt": (74, {
        "hw.machine_arch": "aarch64",
        "hw.model": "ARM Cortex-A53 r0p4",
        "kern.osrelease": "12.2-RELEASE",
        "kern.osreldate": "1202000",
        "kern.version": "FreeBSD 12.2-RELEASE r366954 GENERIC",
        "kern.eventtimer.et.ARM MPCore Eventtimer.flags": "6",
        "kern.eventtimer.timer": "ARM MPCore Eventtimer",
        "kern.timecounter.tc.ARM MPCore Timecounter.mask": "4294967295",
        "kern.clockrate": "{ hz = 1000, tick = 1000, profhz = 8129, stathz = 127 }",
    }, []),
    "trouble-free-14.4-p10-unknown-oid-errors.txt": (0, {}, [
        "kstat.zfs.misc.arcstats.size", "kstat.zfs.misc.arcstats.c_min", "vfs.zfs.arc_max",
    ]),
    "derived-13-sysctl-dev-aesni-cryptosoft-and-unknown.txt": (10, {
        "dev.aesni.0.%desc": "AES-CBC,AES-CCM,AES-GCM,AES-ICM,AES-XTS,SHA1,SHA256",
        "dev.aesni.0.%driver": "aesni",
        "dev.aesni.0.%parent": "nexus0",
        "dev.aesni.0.%pnpinfo": "",
        "dev.cryptosoft.0.%desc": "software crypto",
    }, ["dev.ossl", "dev.armv8crypto", "dev.padlock"]),
}


def test_every_fixture_has_a_case() -> None:
    assert set(names("sysctl")) == set(CASES)


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_sysctl_fixture(fixture: str) -> None:
    count, present, unknown = CASES[fixture]
    text = load("sysctl", fixture)
    got = parse_sysctl(text)
    assert len(got) == count
    for name, value in present.items():
        assert got[name] == value
    assert unknown_oids(text) == unknown


def test_conftxt_and_prompt_lines_are_ignored() -> None:
    got = parse_sysctl(load("sysctl", "gehaowu-9.2-i386-sysctl-a-grep-cpu-xeon5130.txt"))
    assert not any(k.startswith("cpu") or k.startswith("sysctl") for k in got)


def test_multiline_value_and_error_lines() -> None:
    text = (
        "kern.version: FreeBSD 10.2-RELEASE #0 r286666: Wed Aug 12 15:26:37 UTC 2015\n"
        "    root@releng1.nyi.freebsd.org:/usr/obj/usr/src/sys/GENERIC\n\n"
        "sysctl: unknown oid 'hardening.version'\n"
        "kern.osrelease: 10.2-RELEASE\n"
    )
    got = parse_sysctl(text)
    assert got["kern.version"].splitlines() == [
        "FreeBSD 10.2-RELEASE #0 r286666: Wed Aug 12 15:26:37 UTC 2015",
        "root@releng1.nyi.freebsd.org:/usr/obj/usr/src/sys/GENERIC",
    ]
    assert got["kern.osrelease"] == "10.2-RELEASE"
    assert "hardening.version" not in got
    assert unknown_oids(text) == ["hardening.version"]


@pytest.mark.parametrize("text", ["", "garbage", ": x", "hw: y", ".a: b", "a.b:c", "\x00"])
def test_not_oid_lines(text: str) -> None:
    assert parse_sysctl(text) == {}


@given(st.text())
def test_never_raises(text: str) -> None:
    for k, v in parse_sysctl(text).items():
        assert isinstance(k, str) and isinstance(v, str)
    unknown_oids(text)


def test_entries_a_reflow_joined_on_one_line_are_split() -> None:
    # as a real how-to published `sysctl net.inet.ipsec` (fixtures/parsers/ipsec/de-howto-...): the next
    # entry starts at a word naming an OID of the same first two parts followed by ":"
    got = parse_sysctl("net.inet.ipsec.dfbit: 0 net.inet.ipsec.ecn: 0 net.inet.ipsec.debug: 0\n"
                       "kern.clockrate: { hz = 1000, tick = 1000, profhz = 8129, stathz = 127 }\n"
                       "hw.model: Intel(R) Xeon(R) CPU            5130  @ 2.00GHz\n"
                       "kern.ipc.tls.enable: 0 -> 1\n")
    assert got == {"net.inet.ipsec.dfbit": "0", "net.inet.ipsec.ecn": "0", "net.inet.ipsec.debug": "0",
                   "kern.clockrate": "{ hz = 1000, tick = 1000, profhz = 8129, stathz = 127 }",
                   "hw.model": "Intel(R) Xeon(R) CPU            5130  @ 2.00GHz",
                   "kern.ipc.tls.enable": "0 -> 1"}
    # a value naming another tree is kept whole; one line gives at most _MAX_JOINED entries
    assert parse_sysctl("kern.x.y: see net.inet.ip.forwarding: 1\n") == {"kern.x.y": "see net.inet.ip.forwarding: 1"}
    many = " ".join(f"net.inet.x{i}: {i}" for i in range(500))
    assert len(parse_sysctl(many)) == 64


def test_the_reflow_split_builds_no_pattern_per_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # a text of many distinct OID names, each value naming its own tree: a regex built per name cost a
    # compile each (30x the parse time); the split now uses one compiled pattern
    import re

    calls: list[str] = []
    for fn in ("search", "match", "compile", "fullmatch", "finditer"):
        real = getattr(re, fn)
        monkeypatch.setattr(re, fn, lambda *a, _real=real, _fn=fn, **k: calls.append(_fn) or _real(*a, **k))
    text = "".join(f"a{i}.b{i}.c: x a{i}.b{i}.d: {i} a{i}.b{i}.e\n" for i in range(300))
    got = parse_sysctl(text)
    assert calls == []
    assert got["a7.b7.c"] == "x" and got["a7.b7.d"] == "7 a7.b7.e" and len(got) == 600
    assert parse_sysctl("a.b.c: 1 a.b.d:2 a.b.e: 3 xa.b.f: 4\n") == {"a.b.c": "1 a.b.d:2", "a.b.e": "3 xa.b.f: 4"}


def test_continuation_lines_are_joined_in_linear_time() -> None:
    # `out[last] + "\n" + line` per continuation line copied the value each time: 300,000 indented lines
    # (1 MiB) after one entry meant ~10^11 bytes copied; joined once they take milliseconds
    import subprocess
    import sys

    code = ("from bsdcrypt.parsers.sysctl import parse_sysctl\n"
            "v = parse_sysctl('kern.version: FreeBSD\\n' + '\\tx\\n' * 300_000)['kern.version']\n"
            "assert v.count('\\n') == 300_000, v[:50]\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=240)
    assert parse_sysctl("kern.version: FreeBSD 14.1\n  GENERIC  \n\tr1\nkern.x: \n  a\nkern.x: 2\n  b\n") == {
        "kern.version": "FreeBSD 14.1\nGENERIC\nr1", "kern.x": "2\nb"}
    assert parse_sysctl("kern.x:\n  a\n  b\n") == {"kern.x": "a\nb"}
