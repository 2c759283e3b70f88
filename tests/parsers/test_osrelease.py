from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.facts import Product
from bsdcrypt.parsers.osrelease import parse_os_release, parse_product

from ._load import load, names


def test_fixtures_listed() -> None:
    assert set(names("osrelease")) == {
        "derived-14.1-p5-var-run-os-release.txt",
        "opnsense-version-console-banner-21.1.3.txt",
        "pfsense-src-etc-platform.txt",
        "pfsense-src-etc-version.txt",
    }


def test_freebsd_os_release() -> None:
    got = parse_os_release(load("osrelease", "derived-14.1-p5-var-run-os-release.txt"))
    assert got["NAME"] == "FreeBSD"
    assert got["ID"] == "freebsd"
    assert got["VERSION"] == "14.1-RELEASE-p5"
    assert got["VERSION_ID"] == "14.1"
    assert got["PRETTY_NAME"] == "FreeBSD 14.1-RELEASE-p5"
    assert got["ANSI_COLOR"] == "0;31"
    assert len(got) == 11


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A='single quoted'\n", {"A": "single quoted"}),
        ('A="with \\"escaped\\" quotes"\n', {"A": 'with "escaped" quotes'}),
        ("# comment\n\nA=1 # trailing comment\n", {"A": "1"}),
        ('A="unterminated\n', {"A": "unterminated"}),
        ("not a line\nB=\n", {"B": ""}),
        ("1A=x\n-x=y\n", {}),
    ],
)
def test_os_release_quoting(text: str, expected: dict[str, str]) -> None:
    assert parse_os_release(text) == expected


def _opnsense_line() -> str:
    banner = load("osrelease", "opnsense-version-console-banner-21.1.3.txt").strip()
    m = re.match(r"^\*\*\* [^:]+: (.*) \*\*\*$", banner)
    assert m
    return m.group(1)


def test_opnsense_version_real_format() -> None:
    got = parse_product(None, None, _opnsense_line(), None, None)
    assert got == Product("OPNsense", "21.1.3", "opnsense")


def test_pfsense_real_files() -> None:
    plat = load("osrelease", "pfsense-src-etc-platform.txt")
    ver = load("osrelease", "pfsense-src-etc-version.txt")
    assert parse_product(plat, ver, None, None, None) == Product("pfSense", "2.4.5-RELEASE", "pfsense")
    assert parse_product(plat, None, None, None, None) == Product("pfSense", None, "pfsense")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((None, None, "OPNsense 24.1.2 (amd64/OpenSSL)\n", None, None),
         Product("OPNsense", "24.1.2", "opnsense")),
        ((None, None, "OPNsense 23.7.12_5 (amd64/LibreSSL)", None, None),
         Product("OPNsense", "23.7.12_5", "opnsense")),
        ((None, None, None, "25.02-R14.3p8\n", None), Product("GhostBSD", "25.02-R14.3p8", "ghostbsd")),
        ((None, "TrueNAS-13.0-U6\n", None, None, None), Product("TrueNAS", "13.0-U6", "truenas")),
        ((None, "FreeNAS-11.3-U5\n", None, None, None), Product("FreeNAS", "11.3-U5", "freenas")),
        ((None, "GhostBSD 24.10.1\n", None, None, None), Product("GhostBSD", "24.10.1", "ghostbsd")),
        (("OPNsense\n", None, None, None, None), Product("OPNsense", None, "opnsense")),
        ((None, None, None, None, "2.6.0-RELEASE\n"), Product("pfSense", "2.6.0-RELEASE", "pfsense")),
        (("pfSense", "garbage here", None, None, "2.7.2-RELEASE"),
         Product("pfSense", "2.7.2-RELEASE", "pfsense")),
        ((None, None, None, None, None), None),
        ((None, None, "sh: opnsense-version: not found", "sh: ghostbsd-version: not found", None), None),
        (("", "", "", "", ""), None),
        ((None, "13.2-RELEASE\n", None, None, None), None),
    ],
)
def test_parse_product(args: tuple[str | None, ...], expected: Product | None) -> None:
    assert parse_product(*args) == expected


@given(st.text())
def test_os_release_never_raises(text: str) -> None:
    parse_os_release(text)


@given(st.tuples(*(st.none() | st.text() for _ in range(5))))
def test_product_never_raises(args: tuple[str | None, ...]) -> None:
    parse_product(*args)
