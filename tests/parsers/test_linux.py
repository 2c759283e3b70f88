from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.parsers.linux import parse_cpuinfo_flags

from ._load import load, names

CASES: dict[str, tuple[int, set[str], set[str]]] = {
    # fixture -> (number of flags, must contain, must not contain)
    "centos74-xeon6148-proc-cpuinfo.txt": (80, {"aes", "pclmulqdq", "hypervisor", "sse4_1", "avx512f"},
                                           {"sha_ni", "vaes"}),
    "buildroot-a53-proc-cpuinfo.txt": (9, {"aes", "pmull", "sha1", "sha2", "crc32"}, {"sha3"}),
}


def test_every_fixture_has_a_case() -> None:
    assert set(names("linux")) == set(CASES)


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_flags(fixture: str) -> None:
    count, present, absent = CASES[fixture]
    flags = parse_cpuinfo_flags(load("linux", fixture))
    assert flags is not None
    assert len(flags) == count
    assert present <= flags
    assert not (absent & flags)


def test_probe_grep_output() -> None:
    # the probe's `grep -m1 -E '^(flags|Features)[[:space:]]*:'` leaves just the one line
    text = load("linux", "buildroot-a53-proc-cpuinfo.txt")
    line = next(x for x in text.splitlines() if x.startswith("Features"))
    assert parse_cpuinfo_flags(line + "\n") == parse_cpuinfo_flags(text)


@pytest.mark.parametrize("text", ["", "processor\t: 0\n", "flags\t\t:\n", "grep: /proc/cpuinfo: no such"])
def test_none(text: str) -> None:
    assert parse_cpuinfo_flags(text) is None


@given(st.text())
def test_never_raises(text: str) -> None:
    parse_cpuinfo_flags(text)


def test_model_name_comes_with_the_flags_line() -> None:
    from bsdcrypt.parsers.linux import parse_cpuinfo_model

    text = "model name\t: Intel(R) Xeon(R) CPU E5-2630 v4 @ 2.20GHz\nflags\t\t: fpu vme aes sse4_1\n"
    assert parse_cpuinfo_model(text) == "Intel(R) Xeon(R) CPU E5-2630 v4 @ 2.20GHz"
    assert parse_cpuinfo_flags(text) == frozenset({"fpu", "vme", "aes", "sse4_1"})
    assert parse_cpuinfo_model("Features\t: fp asimd aes\n") is None
