"""Numbers in host text that int() refuses: '²' (str.isdigit() says yes, int() raises), other scripts'
digits, and numbers over 4300 digits (int() raises since Python 3.11). Every parser reads them as
"not a number" (unknown), never a traceback: parsers.decimal is the one conversion."""

from __future__ import annotations

import pytest

from bsdcrypt.assess import assess
from bsdcrypt.parsers import decimal, ia32cap
from bsdcrypt.parsers.dmesg import parse_dmesg
from bsdcrypt.parsers.geli import parse_geli_list
from bsdcrypt.parsers.openssl_version import OpensslVersion, parse_version
from bsdcrypt.parsers.setkey import esp_algorithm, is_number
from bsdcrypt.probe import Evidence, Step, StepName

HUGE = "9" * 5000
UNAME = b"FreeBSD fw 14.1-RELEASE FreeBSD 14.1-RELEASE releng/14.1-n267679-10e31f0946d8 GENERIC amd64\n"


@pytest.mark.parametrize(("text", "want"), [
    ("23", 23), ("0", 0), ("18446744073709551615", 18446744073709551615),
    ("²", None), ("١٢", None), (HUGE, None), ("", None), ("-1", None), (" 1", None), (None, None),
])
def test_decimal(text: str | None, want: int | None) -> None:
    assert decimal(text) == want


@pytest.mark.parametrize(("printed", "want"), [
    ("23", "aes-gmac"), ("12", "aes-cbc"), ("aes-gcm-16", "aes-gcm-16"), ("99", None),
    ("99999999999999999999", None), (HUGE, None),  # a number, none FreeBSD's pfkeyv2.h names
    ("²", "²"), ("١٢", "١٢"),  # not setkey's %u: a name bsdcrypt does not know (its cipher: unknown)
])
def test_esp_algorithm_of_hostile_numbers(printed: str, want: str | None) -> None:
    assert esp_algorithm(printed) == want
    assert is_number(printed) == (printed.isascii() and printed.isdigit())


def _ipsec(e_value: str) -> list[tuple[str | None, str]]:
    sad = f"\tesp mode=tunnel\n\tE: {e_value}\n\tA: hmac-sha1\n\tstate=mature\n".encode()
    ev = Evidence({StepName.UNAME_S: Step(0, b"FreeBSD\n"), StepName.UNAME_A: Step(0, UNAME),
                   StepName.SETKEY_SAD: Step(0, sad)})
    ipsec = next(c for c in assess(ev, "h", "test").consumers if c.kind == "ipsec")
    return [(i.cipher, i.verdict) for i in ipsec.items]


@pytest.mark.parametrize("e_value", ["²", HUGE, "١٢"])
def test_an_sa_with_a_hostile_number_is_unknown_not_a_traceback(e_value: str) -> None:
    assert _ipsec(e_value) == [(None, "unknown")]


def test_geli_list_key_length_over_4300_digits() -> None:
    got = parse_geli_list(f"Geom name: ada0p2.eli\nEncryptionAlgorithm: AES-XTS\nKeyLength: {HUGE}\nCrypto: software\n")
    assert [(g.name, g.key_length, g.crypto) for g in got] == [("ada0p2.eli", None, "software")]


@pytest.mark.parametrize("key", [HUGE, "²"])
def test_dmesg_geli_key_length_not_a_number(key: str) -> None:
    d = parse_dmesg(f"GEOM_ELI: Device ada0p2.eli created.\nGEOM_ELI: Encryption: AES-XTS {key}\n"
                    "GEOM_ELI:     Crypto: software\n")
    assert [(g.encryption, g.key_length) for g in d.geli] == [("AES-XTS", None)]


def test_dmesg_geli_key_length_still_read() -> None:
    d = parse_dmesg("GEOM_ELI: Device ada0p2.eli created.\nGEOM_ELI: Encryption: AES-XTS 256\n")
    assert [g.key_length for g in d.geli] == [256]


def test_openssl_prerelease_of_many_digits() -> None:
    v = parse_version(f"OpenSSL 1.1.1-pre{'9' * 900}  11 Sep 2018\n")
    assert v is not None and v.prerelease == f"pre{'9' * 900}"
    # a line too long to be a version line is none (unknown), read in bounded time
    assert parse_version(f"OpenSSL 1.1.1-pre{HUGE}  11 Sep 2018\n") is None
    huge = OpensslVersion("OpenSSL", f"1.1.1-pre{HUGE}", 1, 1, 1, prerelease=f"pre{HUGE}")
    pre9 = parse_version("OpenSSL 1.1.1-pre9  21 Aug 2018\n")
    assert ia32cap.library(huge).grammar == ia32cap.library(pre9).grammar == ia32cap.library(v).grammar


@pytest.mark.parametrize("line", ["²", HUGE])
def test_ia32cap_override_with_a_hostile_line_number_is_skipped(line: str) -> None:
    grep = f"/etc/rc.conf:{line}:sshd_env=\"OPENSSL_ia32cap=~0x200000200000000\"\n".encode()
    ev = Evidence({StepName.UNAME_S: Step(0, b"FreeBSD\n"), StepName.UNAME_A: Step(0, UNAME),
                   StepName.IA32CAP_OVERRIDES: Step(0, grep)})
    assert assess(ev, "h", "test").userland_aes.overrides == []


def test_a_huge_sa_algorithm_name_is_cut_not_echoed_whole() -> None:
    from bsdcrypt.parsers.setkey import parse_setkey_dump

    sa = parse_setkey_dump(f"\tesp mode=tunnel\n\tE: {HUGE}\n\tA: {'x' * 100_000}\n").sas[0]
    assert (len(sa.encryption or ""), len(sa.authentication or "")) == (64, 64)
    assert esp_algorithm(sa.encryption) is None  # still a number no pfkeyv2.h value names
