"""`openssl speed` tables of OpenSSL 1.0.2 and 3.x -> bytes per second."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsdcrypt.parsers.openssl_speed import parse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "openssl"


def fixture(name: str) -> str:
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[0].startswith("# source:"), name
    for i, line in enumerate(lines[:10]):
        if line.rstrip("\n") == "# ---":
            return "".join(lines[i + 1 :])
    raise AssertionError(f"{name}: no '# ---' header line")


def test_every_fixture_parses_one_row() -> None:
    names = sorted(p.name for p in FIXTURES.glob("*.txt"))
    assert len(names) >= 8
    for name in names:
        r = parse(fixture(name))
        assert len(r.rows) == 1, name
        assert all(v > 0 for v in r.rows[0].bytes_per_s.values()), name


def test_openssl_1_0_2_legacy_label_with_space_and_five_sizes() -> None:
    r = parse(fixture("opnsense-core2343-102k-noevp-aes128cbc.txt"))
    assert r.version == "1.0.2k-freebsd"
    assert r.block_sizes == (16, 64, 256, 1024, 8192)
    row = r.row("aes-128 cbc")
    assert row is not None
    assert row.bytes_per_s[8192] == pytest.approx(86029.65e3)  # 'k' = 1000 bytes/s
    assert row.bulk_bytes_per_s == pytest.approx(86029650.0)
    assert r.ia32cap is None


def test_openssl_3_evp_uppercase_and_cpuinfo() -> None:
    r = parse(fixture("aws-c7a-al2023-openssl3.0.8-evp-aes128cbc-aesni.txt"))
    assert r.version == "3.0.8"
    assert r.ia32cap == "0xfefa320b078bffff:0x405f5af1bf05a9"
    assert r.ia32cap_env is None
    row = r.row("aes-128-cbc")  # case-insensitive
    assert row is not None and row.bytes_per_s[16384] == pytest.approx(1430607.19e3)


def test_masked_ia32cap_is_reported() -> None:
    r = parse(fixture("debian-openssl3.0.19-evp-aes128gcm-ia32cap-masked.txt"))
    assert r.ia32cap_env == "~0x200000200000000"
    plain = parse(fixture("debian-openssl3.0.19-evp-aes128gcm-aesni.txt"))
    a, m = plain.row("aes-128-gcm"), r.row("aes-128-gcm")
    assert a is not None and m is not None
    assert a.bulk_bytes_per_s > 5 * m.bulk_bytes_per_s


def test_overflowing_label_and_aead_sizes() -> None:
    r = parse(fixture("win-ryzen5600h-openssl3.4.0-aead-chacha20poly1305.txt"))
    assert r.block_sizes == (2, 31, 136, 1024, 8192, 16384)
    row = r.row("chacha20-poly1305")
    assert row is not None
    assert row.name == "ChaCha20-Poly1305"
    assert row.bytes_per_s[2] == pytest.approx(5539.58e3)


def test_values_below_10000_have_no_k_and_are_still_thousands() -> None:
    text = (
        "The 'numbers' are in 1000s of bytes per second processed.\n"
        "type             16 bytes     64 bytes    256 bytes   1024 bytes   8192 bytes  16384 bytes\n"
        "aes-256-gcm       9876.54     9999.99     12345.67k    23456.78k    34567.89k    45678.90k\n"
    )
    row = parse(text).row("aes-256-gcm")
    assert row is not None
    assert row.bytes_per_s[16] == pytest.approx(9876540.0)
    assert row.bytes_per_s[256] == pytest.approx(12345670.0)


def test_stderr_lines_and_garbage_are_ignored() -> None:
    text = "Doing aes-128-gcm for 3s on 16 size blocks: 1 aes-128-gcm's in 3.00s\nnot a table\n"
    r = parse(text)
    assert r.rows == () and r.block_sizes == ()
