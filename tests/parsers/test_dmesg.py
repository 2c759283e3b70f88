from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.facts import DmesgBoot
from bsdcrypt.parsers.dmesg import parse_dmesg

from ._load import load, names

AES5 = ("AES-CBC", "AES-CCM", "AES-GCM", "AES-ICM", "AES-XTS")
AES5SHA = (*AES5, "SHA1", "SHA256")

# fixture -> expected: banner start, os, boots, hbsd, model, AESNI in Features2, SHA in stdext,
#            hypervisor, drivers {driver: (attached, algorithms-or-message)}
CASES: dict[str, dict[str, Any]] = {
    "bhyve-guest-12.2-e3-1225v5.txt": dict(
        banner="FreeBSD 12.2-RELEASE r366954", os="FreeBSD", boots=1, hbsd=False,
        model="Intel(R) Xeon(R) CPU E3-1225 v5 @ 3.30GHz", aesni=True, sha=False,
        hv="bhyve bhyve", drivers={}),
    "freebsd11-current-4s-xeon-e7-8857v2-with-prompt.txt": dict(
        banner="FreeBSD 11.0-CURRENT #0 r280797", os="FreeBSD", boots=1, hbsd=False,
        model="Intel(R) Xeon(R) CPU E7-8857 v2 @ 3.00GHz", aesni=True, sha=False, hv=None, drivers={}),
    "freebsd14-current-ryzen-v1202b-aesni-sha.txt": dict(
        banner="FreeBSD 14.0-CURRENT #0", os="FreeBSD", boots=1, hbsd=False,
        model="AMD Ryzen Embedded V1202B with Radeon Vega Gfx", aesni=True, sha=True, hv=None,
        drivers={"aesni": (True, AES5SHA)}),
    "freenas11.3-xeon-x3430-no-aesni-old-msg.txt": dict(
        banner="FreeBSD 11.3-RELEASE-p9 #0", os="FreeBSD", boots=1, hbsd=False,
        model="Intel(R) Xeon(R) CPU           X3430  @ 2.40GHz", aesni=False, sha=None, hv=None,
        drivers={"aesni": (False, "No AESNI support."), "padlock": (False, "No ACE support.")}),
    "hardenedbsd13-stable-epyc-ts-prefixed.txt": dict(
        banner="FreeBSD 13.0-STABLE-HBSD #199", os="FreeBSD", boots=1, hbsd=True,
        model="AMD EPYC 7402P 24-Core Processor", aesni=True, sha=True, hv=None,
        drivers={"aesni": (True, AES5SHA)}),
    "hyperv-13.0-p4-i7-11375h.txt": dict(
        banner="FreeBSD 13.0-RELEASE-p4 #0", os="FreeBSD", boots=1, hbsd=False,
        model="11th Gen Intel(R) Core(TM) i7-11375H @ 3.30GHz", aesni=True, sha=True, hv="Microsoft Hv",
        drivers={"aesni": (True, AES5SHA)}),
    "midnightbsd2.2.6-i386-pentium-m.txt": dict(
        banner="MidnightBSD 2.2.6 #5", os="MidnightBSD", boots=1, hbsd=False,
        model="Intel(R) Pentium(R) M processor 2.13GHz", aesni=False, sha=None, hv=None, drivers={}),
    "opnsense-upgrade-11.2-to-13.0-core2-multi-boot.txt": dict(
        banner="FreeBSD 13.0-STABLE stable/22.1-n248059-267a40127d5", os="FreeBSD", boots=4, hbsd=False,
        model="Intel(R) Core(TM)2 Duo CPU     E7400  @ 2.80GHz", aesni=False, sha=None, hv=None,
        drivers={"aesni": (False, "No AES or SHA support.")}),
    "opnsense20.7-hbsd12.1-p8-i5-6200u.txt": dict(
        banner="FreeBSD 12.1-RELEASE-p8-HBSD #0", os="FreeBSD", boots=1, hbsd=True,
        model="Intel(R) Core(TM) i5-6200U CPU @ 2.30GHz", aesni=True, sha=False, hv=None,
        drivers={"aesni": (True, AES5)}),
    "opnsense21.1-illumos-bhyve-xeon4110.txt": dict(
        banner="FreeBSD 12.1-RELEASE-p16-HBSD #0", os="FreeBSD", boots=1, hbsd=True,
        model="Intel(R) Xeon(R) Silver 4110 CPU @ 2.10GHz", aesni=True, sha=False, hv="bhyve bhyve",
        drivers={"aesni": (True, AES5)}),
    "opnsense21.1-xen-viridian-i3-7130u.txt": dict(
        banner="FreeBSD 12.1-RELEASE-p16-HBSD #0", os="FreeBSD", boots=1, hbsd=True,
        model="Intel(R) Core(TM) i3-7130U CPU @ 2.70GHz", aesni=True, sha=False, hv="Microsoft Hv",
        drivers={"aesni": (True, AES5)}),
    "opnsense22.1-celeron-j4125-aesni-sha-only.txt": dict(
        banner="FreeBSD 13.0-STABLE stable/22.1-n248088-47fa565344c", os="FreeBSD", boots=2, hbsd=False,
        model="Intel(R) Celeron(R) J4125 CPU @ 2.00GHz", aesni=False, sha=True, hv=None,
        drivers={"aesni": (True, ("SHA1", "SHA256"))}),
    "opnsense22.1-rpi3-arm64-13.0-armv8crypto-lacks-aes-excerpt.txt": dict(
        banner="FreeBSD 13.0-STABLE stable/22.1-n248056", os="FreeBSD", boots=1, hbsd=False,
        model="ARM Cortex-A53 r0p4", aesni=None, sha=None, hv=None,
        drivers={"armv8crypto": (False, "CPU lacks AES instructions")}),
    "opnsense23.7-r6s-arm64-13.2-armv8crypto-excerpt.txt": dict(
        banner="FreeBSD 13.2-RELEASE-p1 stable/23.7", os="FreeBSD", boots=1, hbsd=False,
        model="ARM Cortex-A55 r2p0", aesni=None, sha=None, hv=None,
        drivers={"armv8crypto": (True, ("AES-CBC", "AES-XTS", "AES-GCM"))}),
    "pfsense2.4.5-celeron-j3160-aesni-not-loaded.txt": dict(
        banner="FreeBSD 11.3-STABLE #243", os="FreeBSD", boots=1, hbsd=False,
        model="Intel(R) Celeron(R) CPU  J3160  @ 1.60GHz", aesni=True, sha=False, hv=None,
        drivers={"padlock": (False, "No ACE support.")}),
    "pfsense2.4.5-i5-4590s-aesni-old-algos.txt": dict(
        banner="FreeBSD 11.3-STABLE #243", os="FreeBSD", boots=1, hbsd=False,
        model="Intel(R) Core(TM) i5-4590S CPU @ 3.00GHz", aesni=True, sha=False, hv=None,
        drivers={"padlock": (False, "No ACE support."),
                 "aesni": (True, ("AES-CBC", "AES-XTS", "AES-GCM", "AES-ICM"))}),
    "syslog-messages-kvm-10.2.txt": dict(
        banner="FreeBSD 10.2-RELEASE #0 r286666", os="FreeBSD", boots=1, hbsd=False,
        model="Intel(R) Xeon(R) CPU E5-2650L v3 @ 1.80GHz", aesni=True, sha=False, hv="KVMKVMKVM",
        drivers={}),
    "truenas12.2-p11-xeon-x3430-no-aes-or-sha.txt": dict(
        banner="FreeBSD 12.2-RELEASE-p11 391fd1153(truenas/12.0-stable) TRUENAS", os="FreeBSD", boots=1,
        hbsd=False, model="Intel(R) Xeon(R) CPU           X3430  @ 2.40GHz", aesni=False, sha=None, hv=None,
        drivers={"aesni": (False, "No AES or SHA support."), "padlock": (False, "No ACE support.")}),
    "truenas13.1-celeron-n3150-aesni-no-onmb.txt": dict(
        banner="FreeBSD 13.1-RELEASE n245376-eba770b30ff TRUENAS", os="FreeBSD", boots=1, hbsd=False,
        model="Intel(R) Celeron(R) CPU  N3150  @ 1.60GHz", aesni=True, sha=False, hv=None,
        drivers={"aesni": (True, AES5), "padlock": (False, "No ACE support.")}),
    "veertu-10.2-i7-4770hq-two-boots.txt": dict(
        banner="FreeBSD 10.2-RELEASE #0 r286666", os="FreeBSD", boots=2, hbsd=False,
        model="Intel(R) Core(TM) i7-4770HQ CPU @ 2.20GHz", aesni=True, sha=False, hv=None, drivers={}),
}


def _drivers(d: DmesgBoot) -> dict[str, tuple[bool, object]]:
    return {m.driver: (m.attached, m.algorithms if m.attached else m.message) for m in d.drivers}


def test_every_fixture_has_a_case() -> None:
    assert set(names("dmesg")) == set(CASES)


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_dmesg_fixture(fixture: str) -> None:
    exp = CASES[fixture]
    d = parse_dmesg(load("dmesg", fixture))
    assert d.banner is not None and d.banner.startswith(exp["banner"])
    assert d.os_name == exp["os"]
    assert d.boots == exp["boots"]
    assert d.hardenedbsd is exp["hbsd"]
    assert d.cpu.model == exp["model"]
    f2, se = d.cpu.features2, d.cpu.stdext
    assert (None if f2 is None else "AESNI" in f2) == exp["aesni"]
    assert (None if se is None else "SHA" in se) == exp["sha"]
    assert d.cpu.hypervisor == exp["hv"]
    assert _drivers(d) == exp["drivers"]


def test_arm64_isa0() -> None:
    r6s = parse_dmesg(load("dmesg", "opnsense23.7-r6s-arm64-13.2-armv8crypto-excerpt.txt")).cpu.isa0
    assert r6s is not None and {"AES+PMULL", "AES", "PMULL", "SHA1", "SHA2", "CRC32"} <= r6s
    rpi = parse_dmesg(load("dmesg", "opnsense22.1-rpi3-arm64-13.0-armv8crypto-lacks-aes-excerpt.txt")).cpu
    assert rpi.isa0 == frozenset({"CRC32"}) and rpi.features2 is None


def test_x86_has_no_isa0_and_stdext2() -> None:
    d = parse_dmesg(load("dmesg", "hyperv-13.0-p4-i7-11375h.txt"))
    assert d.cpu.isa0 is None
    assert d.cpu.stdext2 is not None and {"VAES", "VPCLMULQDQ"} <= d.cpu.stdext2


def test_unknown_bit_inside_features2() -> None:
    f2 = parse_dmesg(load("dmesg", "veertu-10.2-i7-4770hq-two-boots.txt")).cpu.features2
    assert f2 is not None and {"SSSE3", "FMA", "AESNI", "HV"} <= f2


def test_multi_boot_uses_last_boot_only() -> None:
    text = load("dmesg", "opnsense-upgrade-11.2-to-13.0-core2-multi-boot.txt")
    assert "No AESNI support." in text  # the first (11.2-HBSD) boot's wording
    d = parse_dmesg(text)
    assert not d.hardenedbsd  # only the first boot was HardenedBSD


def test_wrapped_features2_is_joined() -> None:
    text = load("dmesg", "truenas13.1-celeron-n3150-aesni-no-onmb.txt")
    line = next(x for x in text.splitlines() if x.strip().startswith("Features2="))
    cut = line.index(",POPCNT")
    wrapped = text.replace(line, line[:cut + 1] + "\n  " + line[cut + 1:])
    d = parse_dmesg(wrapped)
    assert d.cpu.features2 == parse_dmesg(text).cpu.features2
    assert d.cpu.features2 is not None and "AESNI" in d.cpu.features2


def test_tail_without_header() -> None:
    text = load("dmesg", "pfsense2.4.5-i5-4590s-aesni-old-algos.txt")
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("Trying to mount root"))
    d = parse_dmesg("\n".join(lines[start:]))  # buffer wrapped: boot header gone
    assert d.banner is None and d.boots == 1
    assert d.cpu.model == "Intel(R) Core(TM) i5-4590S CPU @ 3.00GHz"  # the microcode-update reprint
    assert d.cpu.features2 is not None and "AESNI" in d.cpu.features2
    assert _drivers(d)["aesni"] == (True, ("AES-CBC", "AES-XTS", "AES-GCM", "AES-ICM"))


def test_tail_of_new_boot_only() -> None:
    text = load("dmesg", "hyperv-13.0-p4-i7-11375h.txt")
    d = parse_dmesg("pcm0: detached\nRebooting...\n---<<BOOT>>---\n" + text.split("aesni0:")[0])
    assert d.boots == 2 and _drivers(d) == {}


@pytest.mark.parametrize(("head", "boots"), [
    ("pcm0: detached\n", 2),  # a device's message
    ("uhub0 on usbus0\n", 2),  # a device attached "on" its bus
    ("em0 at pci0 device 3\n", 2),  # or "at" it
    ("\n" * 1000 + "   \n", 1),  # blank lines are no partial boot
    ("Rebooting...\n", 1),
])
def test_a_partial_boot_above_the_first_counts_if_a_kernel_printed_it(head: str, boots: int) -> None:
    text = load("dmesg", "hyperv-13.0-p4-i7-11375h.txt")
    assert parse_dmesg(head + "---<<BOOT>>---\n" + text).boots == boots


def test_last_message_of_a_unit_wins() -> None:
    text = load("dmesg", "truenas13.1-celeron-n3150-aesni-no-onmb.txt") + "aesni0: detached\n"
    assert _drivers(parse_dmesg(text))["aesni"] == (False, "detached")


def test_null_and_html_damage() -> None:
    text = load("dmesg", "hyperv-13.0-p4-i7-11375h.txt")
    d = parse_dmesg("<br />\n".join(text.splitlines()) + "\\000\x00")
    assert _drivers(d)["aesni"] == (True, AES5SHA)


def test_other_syslog_programs_are_ignored() -> None:
    text = (
        "Apr 27 14:20:15 host sshd[12]: aesni0: <AES-CBC>\n"
        "Apr 27 14:20:16 host kernel: aesni0: <AES-XTS>\n"
    )
    assert _drivers(parse_dmesg(text)) == {"aesni": (True, ("AES-XTS",))}


@pytest.mark.parametrize("text", ["", "\n\n", "hello world\n", "\x00\x01\x02", "<<<>>>", "---<<BOOT>>---"])
def test_garbage(text: str) -> None:
    d = parse_dmesg(text)
    assert d.banner is None and d.cpu.model is None and d.drivers == ()


def test_empty_is_default() -> None:
    assert parse_dmesg("") == DmesgBoot()


@pytest.mark.slow
@given(st.text())
def test_never_raises_text(text: str) -> None:
    parse_dmesg(text)


@given(st.lists(st.sampled_from([
    "---<<BOOT>>---", "Copyright (c) 1992-2021 The FreeBSD Project.", "CPU: x (1-MHz K8-class CPU)",
    "  Features2=0x1<SSE3,", "AESNI>", "aesni0: <AES-XTS>", "aesni0: No AES or SHA support.",
    " Instruction Set Attributes 0 = <AES", "[1] ", "Apr  1 00:00:00 h kernel: ", "<", ">", "",
])))
def test_never_raises_fragments(parts: list[str]) -> None:
    parse_dmesg("\n".join(parts))


@given(st.binary())
def test_never_raises_bytes(data: bytes) -> None:
    parse_dmesg(data.decode("utf-8", errors="replace"))


def test_vm_hint_lines_are_all_found() -> None:
    """parse_dmesg tries vm_hint_of only on lines holding a VM_LITERALS string or starting with a
    VM_LINE_STARTS one: every alternative of every hint pattern must hold one of them."""
    from bsdcrypt.parsers import dmesg

    def alternatives(pattern: str) -> list[str]:  # split at the top-level "|" only
        out, depth, start = [], 0, 0
        for i, c in enumerate(pattern):
            depth += {"(": 1, ")": -1}.get(c, 0)
            if c == "|" and depth == 0:
                out.append(pattern[start:i])
                start = i + 1
        return [*out, pattern[start:]]

    for pattern, _ in dmesg.VM_HINTS:
        for alt in alternatives(pattern.pattern):
            anchored = alt.startswith("^") and alt[1:].startswith(dmesg.VM_LINE_STARTS)
            assert anchored or any(lit in alt for lit in dmesg.VM_LITERALS), alt


def test_vm_hint_prefilter_passes_every_hint_line_of_the_real_outputs() -> None:
    """The cheap test parse_dmesg runs before the hint regexes lets through every real line they match."""
    from bsdcrypt.parsers import dmesg

    hits = 0
    for name in names("dmesg"):
        for raw in load("dmesg", name).splitlines():
            line = raw.strip()
            if dmesg.vm_hint_of(line) is not None:
                hits += 1
                assert line.startswith(dmesg.VM_LINE_STARTS) or dmesg.has_vm_literal(line), line
    assert hits >= 10  # the real outputs hold hint lines of several hypervisors


@pytest.mark.parametrize("fixture", ["hyperv-13.0-p4-i7-11375h.txt", "veertu-10.2-i7-4770hq-two-boots.txt",
                                     "opnsense21.1-xen-viridian-i3-7130u.txt"])
def test_line_breaks_prefixes_and_indentation_change_nothing(fixture: str) -> None:
    """The lines worth a look are found by searching the whole text: \\r\\n line ends, a msgbuf prefix
    on every line, indentation and trailing blanks must give what the plain text gives."""
    text = load("dmesg", fixture)
    plain = parse_dmesg(text)
    lines = text.splitlines()
    assert parse_dmesg("\r\n".join(lines) + "\r\n") == plain
    assert parse_dmesg("".join(f"[{i}] {line}\n" for i, line in enumerate(lines))) == plain
    moved = parse_dmesg("\n".join(f"  {line}  \t" for line in lines))
    assert moved.cpu == plain.cpu and moved.drivers == plain.drivers and moved.vm_hint == plain.vm_hint


def test_vm_hint_is_the_first_matching_line() -> None:
    text = ("---<<BOOT>>---\nFreeBSD 13.2-RELEASE GENERIC amd64\nada0: <QEMU HARDDISK 2.5+> ATA-7 device\n"
            "vboxguest0: <VirtualBox Guest Service> port 0xd020-0xd03f\n")
    d = parse_dmesg(text)
    assert (d.vm_hint, d.vm_hint_text) == ("qemu", "ada0: <QEMU HARDDISK 2.5+> ATA-7 device")
    d = parse_dmesg(text.replace("<QEMU HARDDISK 2.5+>", "<WDC WD10EZEX>"))
    assert d.vm_hint == "vbox"


@pytest.mark.parametrize("fixture", names("dmesg"))
def test_trailing_blanks_change_nothing(fixture: str) -> None:
    """parse_dmesg strips every line it reads, so blanks after a line's text change nothing (the prefix
    search cuts them from the prefixed lines only: a msgbuf or syslog line)."""
    text = load("dmesg", fixture)
    assert parse_dmesg("".join(f"{line} \t \n" for line in text.splitlines())) == parse_dmesg(text)
    if not text.startswith("["):  # one msgbuf prefix is taken off a line, not two
        assert parse_dmesg("".join(f"[1] {line}  \n" for line in text.splitlines())) == parse_dmesg(text)
