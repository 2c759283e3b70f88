from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.parsers.geli import parse_geli_list

from ._load import load, names

P = dict[str, Any]
CASES: dict[str, list[P]] = {
    "bsdnow-feedback-13.0-sw.txt": [dict(
        name="ada0p2.eli", state="ACTIVE", encryption="AES-XTS", key_length=256, crypto="software",
        authentication=None, flags=("BOOT", "GELIBOOT"), version=7, consumer="ada0p2")],
    "do-blockstorage-hw-10.2.txt": [dict(
        name="gpt/volume-nyc1-01.eli", state="ACTIVE", encryption="AES-XTS", key_length=256,
        crypto="hardware", authentication=None, flags=(), version=7, consumer="gpt/volume-nyc1-01")],
    "rubenerd-xeon-hw-excerpt.txt": [dict(
        name="gpt/<SERIAL>.eli", state="ACTIVE", encryption="AES-XTS", key_length=256, crypto="hardware",
        authentication=None, flags=(), version=7, consumer=None)],
    "vermaden-bhyve-auth-reflowed.txt": [dict(
        name="nda0p5.eli", state="ACTIVE", encryption="AES-XTS", key_length=256,
        crypto="accelerated software", authentication="HMAC/SHA256",
        flags=("BOOT", "AUTH", "NODELETE", "AUTORESIZE"), version=7, consumer="nda0p5")],
    "derived-14-geli-list-onetime-and-disk.txt": [
        dict(name="md0.eli", state="ACTIVE", encryption="AES-XTS", key_length=128,
             crypto="accelerated software", authentication=None,
             flags=("ONETIME", "W-DETACH", "W-OPEN", "AUTORESIZE"), version=7, consumer="md0"),
        dict(name="ada1p1.eli", state="ACTIVE", encryption="AES-XTS", key_length=256, crypto="software",
             authentication=None, flags=(), version=7, consumer="ada1p1"),
    ],
    "derived-geli-list-errors.txt": [],
}


def test_every_fixture_has_a_case() -> None:
    assert set(names("geli")) == set(CASES)


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_geli_fixture(fixture: str) -> None:
    got = [vars(p) for p in parse_geli_list(load("geli", fixture))]
    assert got == CASES[fixture]


def test_order_of_config_lines_does_not_matter() -> None:
    text = load("geli", "bsdnow-feedback-13.0-sw.txt")
    head, rest = text.split("Providers:", 1)
    lines = head.splitlines()
    shuffled = "\n".join([lines[0], lines[1], *reversed(lines[2:])]) + "\nProviders:" + rest
    assert parse_geli_list(shuffled) == parse_geli_list(text)


def test_provider_config_lines_are_not_geom_config() -> None:
    text = load("geli", "derived-14-geli-list-onetime-and-disk.txt").replace(
        "   Mode: r1w1e1\n\n", "   Mode: r1w1e1\n   State: SUSPENDED\n\n")
    assert [p.state for p in parse_geli_list(text)] == ["ACTIVE", "ACTIVE"]


@pytest.mark.parametrize("text", ["", "garbage\n", "Geom name:\n", "Crypto: hardware\n", "\x00"])
def test_garbage(text: str) -> None:
    assert parse_geli_list(text) == []


@pytest.mark.slow
@given(st.text())
def test_never_raises(text: str) -> None:
    for p in parse_geli_list(text):
        assert p.name


@given(st.lists(st.sampled_from([
    "Geom name: x.eli", "Crypto: hardware", "KeyLength: abc", "Version:", "Providers:", "Consumers:",
    "1. Name: y", "   Mode: r0w0e0", "Flags: NONE", "", "State: ACTIVEKeyLength: 1Crypto: x",
])))
def test_never_raises_fragments(parts: list[str]) -> None:
    parse_geli_list("\n".join(parts))
