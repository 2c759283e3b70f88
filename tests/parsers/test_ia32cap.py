"""The OPENSSL_ia32cap grammar per library and the one value bsdcrypt computes (docs/userland.md)."""

from __future__ import annotations

import pytest

from bsdcrypt.parsers import ia32cap
from bsdcrypt.parsers.openssl_version import parse_version

NEHALEM = (0x80982201478BFFFD, 0x0)  # qemu-x86_64 -cpu Nehalem, OpenSSL 3.0.19 (fixture)
HOST = (0xFFFA3203078BFFFF, 0x405FC6F1BF07AB)  # this build machine, OpenSSL 3.0.19 (fixture)


def lib(text: str) -> ia32cap.Library:
    return ia32cap.library(parse_version(text + "\n"))


@pytest.mark.parametrize(
    "text, grammar",
    [
        ("OpenSSL 1.0.2k-freebsd  26 Jan 2017", "sscanf"),
        ("OpenSSL 1.1.0h  27 Mar 2018", "sscanf"),
        ("OpenSSL 1.1.0i  14 Aug 2018", "two-word"),
        ("OpenSSL 1.1.1-pre8 (beta) 20 Jun 2018", "sscanf"),
        ("OpenSSL 1.1.1-pre9 (beta) 21 Aug 2018", "two-word"),
        ("OpenSSL 1.1.1k-freebsd  25 Mar 2021", "two-word"),
        ("OpenSSL 3.0.19 27 Jan 2026", "two-word"),
        ("OpenSSL 3.4.4 27 Jan 2026", "two-word"),
        ("OpenSSL 3.5.4 30 Sep 2025", "five-word"),
        ("OpenSSL 3.6.1 27 Jan 2026", "five-word"),
        ("LibreSSL 3.3.6", None),
    ],
)
def test_grammar_per_version(text: str, grammar: str | None) -> None:
    assert lib(text).grammar == grammar


def test_no_version_no_grammar() -> None:
    assert ia32cap.library(None).grammar is None


def test_forced_value_two_words_from_the_hosts_own_vector() -> None:
    value = ia32cap.forced_value(NEHALEM, lib("OpenSSL 3.0.19 27 Jan 2026"))
    assert value == "0x82982203478bfffd:0x0"  # exactly bits 57 and 33 added, nothing else
    words = ia32cap.parse_value(value)
    assert words is not None and words[0] ^ NEHALEM[0] == ia32cap.AESNI | ia32cap.PCLMULQDQ


def test_forced_value_on_a_host_that_shows_aes_is_its_own_vector() -> None:
    assert ia32cap.forced_value(HOST, lib("OpenSSL 3.0.19 27 Jan 2026")) == "0xfffa3203078bffff:0x405fc6f1bf07ab"


def test_five_words_pad_with_zero_never_more() -> None:
    value = ia32cap.forced_value(NEHALEM, lib("OpenSSL 3.5.4 30 Sep 2025"))
    assert value == "0x82982203478bfffd:0x0:0x0:0x0:0x0"


def test_sscanf_clears_bit_63_and_zeroes_w1() -> None:
    value = ia32cap.forced_value(HOST, lib("OpenSSL 1.0.2k-freebsd  26 Jan 2017"))
    words = ia32cap.parse_value(value)
    assert words is not None and not words[0] & (1 << 63) and words[1] == 0


@pytest.mark.parametrize("text", ["LibreSSL 3.3.6"])
def test_no_value_for_libressl(text: str) -> None:
    with pytest.raises(ia32cap.CannotCompute, match="ignores"):
        ia32cap.forced_value(NEHALEM, lib(text))


def test_never_a_plus_never_a_blank() -> None:
    for text in ("OpenSSL 1.0.2u  20 Dec 2019", "OpenSSL 1.1.1w  11 Sep 2023", "OpenSSL 3.5.5 27 Jan 2026"):
        value = ia32cap.forced_value(NEHALEM, lib(text))
        assert not value.startswith(("+", "-", " ", "~")) and all(f.startswith("0x") for f in value.split(":"))


def test_masks() -> None:
    v30 = parse_version("OpenSSL 3.0.19 27 Jan 2026\n")
    v32 = parse_version("OpenSSL 3.2.0 23 Nov 2023\n")
    v35 = parse_version("OpenSSL 3.5.5 27 Jan 2026\n")
    assert v30 and v32 and v35
    assert ia32cap.mask_value(ia32cap.library(v30), v30) == "~0x200000200000000:~0x0"
    assert ia32cap.mask_value(ia32cap.library(v32), v32) == "~0x200000200000000:~0x60000000000"
    assert ia32cap.mask_value(ia32cap.library(v35), v35) == "~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0"


def test_echo_check() -> None:
    value = "0x82982203478bfffd:0x0"
    assert ia32cap.echo_matches(value, (0x82982203478BFFFD, 0x0))
    assert ia32cap.echo_matches(value + ":0x0:0x0:0x0", (0x82982203478BFFFD, 0x0))  # 3.0 prints two words
    assert not ia32cap.echo_matches(value, (0x80982201478BFFFD, 0x0))  # bit 57 did not stick
    assert not ia32cap.echo_matches("~0x200000200000000", (0xFDFA3201078BFFFF, 0x0))


@pytest.mark.parametrize(
    "value, hazard",
    [
        ("+0x200000200000000", "plus"),
        ("fffa32034f8bffff", "no-0x"),
        ("~0x200000200000000:~0", "mask"),
        ("0x82982203478bfffd", "replaces-w1"),
        ("0x82982203478bfffd:0x0", "ok"),
        ("0xfffa3203078bffff:0x405fc6f1bf07ab", "stale"),  # another machine's vector
    ],
)
def test_classify_override_against_nehalem(value: str, hazard: str) -> None:
    assert ia32cap.classify_override(value, NEHALEM, lib("OpenSSL 3.0.19 27 Jan 2026"))[0] == hazard
