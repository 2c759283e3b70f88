"""parse_dmesg's boot facts on real dmesg.boot files (fixtures/pastes/): banner arch and kernel config,
no Features2 line, attach before/after the root mount, GELI providers at boot, hypervisor hints."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsdcrypt.facts import DmesgBoot
from bsdcrypt.parsers.dmesg import parse_dmesg

PASTES = Path(__file__).resolve().parents[2] / "fixtures" / "pastes"


def _boot(name: str) -> DmesgBoot:
    return parse_dmesg((PASTES / name).read_text(errors="replace").split("\n# ---\n", 1)[1])


# fixture -> (arch, kernel ident, no_features2, {driver: before_root}, GELI providers, vm_hint, boots)
CASES = {
    # one-line banner "FreeBSD 12.2-RELEASE r366954 GENERIC amd64"; aesni0 before the root mount
    "bsdhw-12.2-ryzen-2400g-aesni-preloaded-geli-hardware.txt": (
        "amd64", "GENERIC", False, {"aesni": True}, 4, None, 1),
    # "#0: <date>" banner with a redacted build path: no config name
    "bsdhw-11.4-i7-7700-aesni-early-path-redacted.txt": ("amd64", None, False, {"aesni": True}, 4, None, 1),
    # Pentium III: Features= without Features2= before "real memory"
    "bsdhw-13.1-i386-pentium3-no-features2-aesni-no-device.txt": (
        "i386", "GENERIC", True, {"aesni": True}, 0, None, 1),
    # arm64: MACHINE is "arm64"; the root mount line is glued onto "Release APs..."
    "bsdhw-13.1-arm64-cortex-a53-armv8crypto.txt": ("arm64", "GENERIC", False, {"armv8crypto": True}, 0, None, 1),
    # five boots (the first cut at the top of the buffer): ossl0 of the second one is not the last boot's
    "bsdhw-13.0-i7-1065g7-ossl0-in-earlier-boot-only.txt": ("amd64", None, False, {"aesni": True}, 1, None, 4),
    # Hyper-V prints its own "Features=" line before "CPU:"; the excerpt ends before "real memory"
    "hyperv-12.1-rbxcloud-e5-2673v3-aesni-hidden-excerpt.txt": ("amd64", "GENERIC", False, {}, 0, "hv", 1),
    # VirtualBox: ACPI "VBOX" ids, no HV bit
    "virtualbox-10.2-i7-3537u-no-hv-bit.txt": ("amd64", "GENERIC", False, {}, 0, "vbox", 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_boot_facts(name: str) -> None:
    arch, ident, no_f2, drivers, geli, hint, boots = CASES[name]
    d = _boot(name)
    assert (d.arch, d.kernel_ident, d.cpu.no_features2) == (arch, ident, no_f2)
    assert {m.driver: m.before_root for m in d.drivers if m.driver in ("aesni", "armv8crypto", "ossl")} == drivers
    assert len(d.geli) == geli and d.vm_hint == hint and d.boots == boots


def test_geli_providers_keep_their_crypto_path() -> None:
    d = _boot("bsdhw-13.0-imac12-i5-2400-geli-accelerated-software.txt")
    assert [(g.name, g.encryption, g.key_length, g.crypto) for g in d.geli] == [
        ("ada0p4.eli", "AES-XTS", 256, "accelerated software")
    ]


def test_a_destroyed_provider_is_dropped() -> None:
    text = (
        "GEOM_ELI: Device ada0p2.eli created.\nGEOM_ELI: Encryption: AES-XTS 128\nGEOM_ELI:     Crypto: hardware\n"
        "GEOM_ELI: Device ada0p2.eli destroyed.\nGEOM_ELI: Device ada0p3.eli created.\n"
        "GEOM_ELI: Encryption: AES-XTS 256\nGEOM_ELI:  Integrity: HMAC/SHA256\nGEOM_ELI:     Crypto: software\n"
        "GEOM_ELI: Detached ada0p9.eli on last close.\n"
    )  # the g_eli.c messages, in the order and spacing bsd-hardware.info's dmesg.boot files show them
    [g] = parse_dmesg(text).geli
    assert (g.name, g.key_length, g.authentication, g.crypto) == ("ada0p3.eli", 256, "HMAC/SHA256", "software")
