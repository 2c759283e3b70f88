from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.facts import Release
from bsdcrypt.parsers.version import parse_freebsd_version, parse_release, parse_uname_a

from ._load import load, names


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("13.0-RELEASE-p4", (13, 0, "RELEASE", 4, False)),
        ("12.1-RELEASE-p8-HBSD", (12, 1, "RELEASE", 8, True)),
        ("13.0-STABLE-HBSD", (13, 0, "STABLE", None, True)),
        ("14.0-CURRENT", (14, 0, "CURRENT", None, False)),
        ("11.3-STABLE", (11, 3, "STABLE", None, False)),
        ("15.0-BETA2", (15, 0, "BETA2", None, False)),
        ("14.0-RC1", (14, 0, "RC1", None, False)),
        ("12.2-PRERELEASE", (12, 2, "PRERELEASE", None, False)),
        ("2.2.6", (2, 2, "", None, False)),  # MidnightBSD banner form
        ("14.4-RELEASE-p10", (14, 4, "RELEASE", 10, False)),
        ("  13.2-RELEASE-p4\n", (13, 2, "RELEASE", 4, False)),
        ("12.1-RELEASE-p16-HBSD", (12, 1, "RELEASE", 16, True)),
    ],
)
def test_parse_release(text: str, expected: tuple[int, int, str, int | None, bool]) -> None:
    r = parse_release(text)
    assert isinstance(r, Release)
    assert (r.major, r.minor, r.branch, r.patch, r.hbsd) == expected
    assert r.raw == text.strip()


@pytest.mark.parametrize(
    "text",
    ["", "FreeBSD 13.0-RELEASE", "13", "13.0-release", "13.0-HBSD", "13.0-RELEASE-p", "v13.0",
     "13.0 RELEASE"],
)
def test_parse_release_rejects(text: str) -> None:
    assert parse_release(text) is None


UNAME: dict[str, dict[str, str]] = {
    "bsdnow425-uname-a-12.2-p7-with-pkg-info.txt": {
        "sysname": "FreeBSD", "hostname": "server1", "release": "12.2-RELEASE-p7",
        "version": "FreeBSD 12.2-RELEASE-p7 GENERIC", "ident": "GENERIC", "machine": "amd64"},
    "bsdrp-apu2-13.0-current-uname-in-bench-info.txt": {
        "sysname": "FreeBSD", "hostname": "apu2", "release": "13.0-CURRENT", "ident": "amd64",
        "machine": "amd64",
        "version": "FreeBSD 13.0-CURRENT #16 r365873M: Fri Sep 18 09:26:08 CEST 2020     "
                   "olivier@lame4.bsdrp.net:/usr/local/BSDRP/workdir/BSDRPcur.amd64/usr/local/BSDRP/BSDRPcur/"
                   "FreeBSD/src/amd64.amd64/sys/amd64"},
    "drm-kmod73-uname-a-13.0-i386.txt": {
        "sysname": "FreeBSD", "hostname": "myhost", "release": "13.0-RELEASE", "ident": "GENERIC",
        "machine": "i386",
        "version": "FreeBSD 13.0-RELEASE #0 releng/13.0-n244733-ea31abc261f: "
                   "Fri Apr  9 04:04:45 UTC 2021     "
                   "root@releng1.nyi.freebsd.org:/usr/obj/usr/src/i386.i386/sys/GENERIC"},
    "hbsd242-paxtest-uname-9.3-p10-custom-kernel.txt": {
        "sysname": "FreeBSD", "hostname": "apocalypse.chrysalisnet.org", "release": "9.3-RELEASE-p10",
        "ident": "APOC93", "machine": "amd64",
        "version": "FreeBSD 9.3-RELEASE-p10 #0 r279966: Fri Mar 13 21:08:46 GMT 2015     "
                   "root@apocalypse.chrysalisnet.org:/usr/obj/usr/src/93/sys/APOC93"},
    "ncsc-pfsense-2.6.0-uname-a-redacted.txt": {
        "sysname": "FreeBSD", "hostname": "[hostname-redacted]", "release": "12.3-STABLE",
        "version": "FreeBSD 12.3-STABLE RELENG_2_6_0-n226742-1285d6d205f pfSense", "ident": "pfSense",
        "machine": "amd64"},
    "os_info246-uname-fields-12.2-p4-amd64-bare.txt": {"sysname": "FreeBSD", "release": "12.2-RELEASE-p4"},
    "os_info253-uname-r-11.4-p3.txt": {"release": "11.4-RELEASE-p3", "machine": "amd64"},
    "rpi3bplus-12.2-arm64-uname-snrmp-ap.txt": {
        "sysname": "FreeBSD", "hostname": "generic", "release": "12.2-RELEASE",
        "version": "FreeBSD 12.2-RELEASE r366954 GENERIC", "ident": "GENERIC", "machine": "arm64",
        "processor": "aarch64"},
    "samdrucker-jail-freebsd-version-vs-uname.txt": {"release": "12.2-RELEASE-p1"},
    "webmin616-freebsd-version-11.0-p10.txt": {"release": "11.0-RELEASE-p10"},
}

FREEBSD_VERSION: dict[str, str | None] = {
    "samdrucker-jail-freebsd-version-vs-uname.txt": "12.2-RELEASE-p2",  # userland, not the host kernel
    "webmin616-freebsd-version-11.0-p10.txt": "11.0-RELEASE-p10",
    "os_info253-uname-r-11.4-p3.txt": "11.4-RELEASE-p3",
    "bsdnow425-uname-a-12.2-p7-with-pkg-info.txt": None,
}


def test_every_fixture_has_a_case() -> None:
    assert set(names("version")) == set(UNAME)


@pytest.mark.parametrize("fixture", sorted(UNAME))
def test_parse_uname_a(fixture: str) -> None:
    assert parse_uname_a(load("version", fixture)) == UNAME[fixture]


@pytest.mark.parametrize("fixture", sorted(FREEBSD_VERSION))
def test_parse_freebsd_version(fixture: str) -> None:
    assert parse_freebsd_version(load("version", fixture)) == FREEBSD_VERSION[fixture]


def test_uname_release_parses() -> None:
    for fixture in UNAME:
        rel = parse_uname_a(load("version", fixture)).get("release")
        assert rel is not None and parse_release(rel) is not None


@pytest.mark.parametrize("text", ["", "hello", "FreeBSD", "\x00", "uname -r\n"])
def test_uname_garbage(text: str) -> None:
    got = parse_uname_a(text)
    assert "release" not in got


@given(st.text())
def test_never_raises(text: str) -> None:
    parse_release(text)
    parse_freebsd_version(text)
    assert all(isinstance(v, str) for v in parse_uname_a(text).values())
