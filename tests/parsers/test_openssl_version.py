from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.parsers.openssl_version import parse_cpuinfo, parse_version

from ._load import load, names

# fixture -> (library, version, (major, minor, patch), program_version, ia32cap words, env echo)
CASES: dict[str, tuple[str, str, tuple[int, int, int], str | None, tuple[int, ...] | None, str | None]] = {
    "debian12-openssl-3.0.19-version-a.txt": (
        "OpenSSL", "3.0.19", (3, 0, 19), None, (0xFFFA3203078BFFFF, 0x405FC6F1BF07AB), None),
    "cygwin-openssl-1.0.2h-version-a.txt": ("OpenSSL", "1.0.2h", (1, 0, 2), None, None, None),
    "linux-openssl-1.1.1k-version-a-excerpt.txt": ("OpenSSL", "1.1.1k", (1, 1, 1), None, None, None),
    "macos-libressl-3.3.6-version-a.txt": ("LibreSSL", "3.3.6", (3, 3, 6), None, None, None),
    "rhel-openssl-3.0.7-fips-library-line.txt": ("OpenSSL", "3.0.7-fips", (3, 0, 7), "3.0.7", None, None),
    "opnsense-openssl-1.0.2k-freebsd-version-line.txt": ("OpenSSL", "1.0.2k-freebsd", (1, 0, 2), None, None, None),
    "source-openssl-3.5.5-version-a-head.txt": ("OpenSSL", "3.5.5", (3, 5, 5), None, None, None),
}
# -c only (no version line): fixture -> (words, env echo)
CPUINFO_ONLY: dict[str, tuple[tuple[int, ...], str | None]] = {
    "debian12-openssl-3.0.19-version-c-masked.txt": (
        (0xFDFA3201078BFFFF, 0x405FC6F1BF07AB), "~0x200000200000000:~0"),
    "qemu-nehalem-openssl-3.0.19-version-c.txt": ((0x80982201478BFFFD, 0x0), None),
    "source-openssl-3.5.5-version-c-env.txt": ((0x82982203478BFFFD, 0, 0, 0, 0), "0x82982203478bfffd:0x0:0x0:0x0:0x0"),
}


def test_every_fixture_has_a_case() -> None:
    assert set(names("openssl_version")) == set(CASES) | set(CPUINFO_ONLY)


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_version(fixture: str) -> None:
    lib, version, number, program, words, env = CASES[fixture]
    v = parse_version(load("openssl_version", fixture))
    assert v is not None
    assert (v.library, v.version, v.number, v.program_version) == (lib, version, number, program)
    assert (v.ia32cap, v.ia32cap_env) == (words, env)


@pytest.mark.parametrize("fixture", sorted(CPUINFO_ONLY))
def test_cpuinfo_only(fixture: str) -> None:
    text = load("openssl_version", fixture)
    assert parse_version(text) is None
    words, env, other = parse_cpuinfo(text)
    assert (words, env, other) == (*CPUINFO_ONLY[fixture], None)


def test_letters_and_prereleases() -> None:
    v = parse_version("OpenSSL 1.1.1-pre8 (beta) 20 Jun 2018\n")
    assert v is not None and v.prerelease == "pre8" and v.letter == ""
    v = parse_version("OpenSSL 1.1.0h  27 Mar 2018\n")
    assert v is not None and v.letter == "h"
    v = parse_version("OpenSSL 3.0.0-alpha6 6 Aug 2020 (Library: OpenSSL 3.0.0-alpha6 6 Aug 2020)\n")
    assert v is not None and v.prerelease == "alpha6" and v.number == (3, 0, 0)


def test_other_architectures() -> None:
    assert parse_cpuinfo("CPUINFO: OPENSSL_armcap=0xbd\n") == (None, None, "armcap")


@pytest.mark.parametrize(
    "text",
    ["", "openssl: not found\n", "GmSSL 2.5.4 - OpenSSL 1.1.0d  3 Sep 2019\n", "CPUINFO: OPENSSL_ia32cap=fffa:0x1\n",
     "CPUINFO: OPENSSL_ia32cap=0x" + "f" * 17 + "\n", "OpenSSL\n"],
)
def test_garbage_is_unknown(text: str) -> None:
    assert parse_version(text) is None
    assert parse_cpuinfo(text)[0] is None


def test_control_characters_in_the_echo_are_dropped() -> None:
    assert parse_cpuinfo("CPUINFO: OPENSSL_ia32cap=0x1:0x0 env:\x1b[31mred\n")[1] is None


@given(st.text(max_size=300))
def test_never_raises(text: str) -> None:
    parse_version(text)
    parse_cpuinfo(text)
