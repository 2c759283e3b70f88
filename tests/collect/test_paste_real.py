"""`bsdcrypt analyze` on real published pastes (fixtures/pastes/): what an expert states from each.

Every fixture is real output with its source header; each row says what the evidence decides and,
in the comment, why. A field the paste cannot decide is expected unknown (None), never a guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bsdcrypt.collect.analyze import collect_file, to_status
from bsdcrypt.status import Status

PASTES = Path(__file__).resolve().parents[2] / "fixtures" / "pastes"

# fixture -> expected report fields; keys: release, arch, ident, aesni (CPU), sha, vm, hv, driver, state,
# attached, compiled_in, at_boot, persisted, geli {name: crypto}, others {driver: state}, findings (ids
# that must be there), absent (ids that must not), verdict
CASES: dict[str, dict[str, Any]] = {
    # 12.2 GENERIC does not compile aesni in; aesni0 attached next to cryptosoft0, long before the root
    # mount: the loader preloaded aesni.ko, so it is loaded and persisted (by whatever loader.conf says).
    "bsdhw-12.2-ryzen-2400g-aesni-preloaded-geli-hardware.txt": dict(
        release="12.2-RELEASE", arch="amd64", ident="GENERIC", aesni=True, sha=True, vm=False,
        driver="aesni", state="loaded", attached=True, compiled_in=False, at_boot=True, persisted=True,
        geli={"ada0p3.eli": "hardware", "ada1p3.eli": "hardware", "ada0p2.eli": "hardware", "ada1p2.eli": "hardware"},
        absent=["driver-unknown", "not-persisted"], verdict="ok"),
    # 11.4 with aesni0 before the root mount, but the banner's build path is redacted: GENERIC (then
    # preloaded) or a custom kernel with `device aesni` (then compiled in) cannot be told apart -- but
    # either way it is there at every boot: persisted, inferred (issue 27).
    "bsdhw-11.4-i7-7700-aesni-early-path-redacted.txt": dict(
        release="11.4-RELEASE-p2", arch="amd64", ident=None, aesni=True, sha=False, driver="aesni",
        state="unknown", attached=True, compiled_in=None, at_boot=True, persisted=True,
        geli={"gpt/swap0.eli": "hardware", "gpt/swap1.eli": "hardware", "gpt/encrypted0.eli": "hardware",
              "gpt/encrypted1.eli": "hardware"},
        findings=["driver-unknown"], verdict="unknown"),
    # Pentium III: identcpu.c prints no Features2 line when CPUID.1:ECX is 0, so no AESNI (bit 25) and no
    # SSE3; 13.1 GENERIC compiles aesni in and it says "No AES or SHA support." -> nothing to accelerate.
    "bsdhw-13.1-i386-pentium3-no-features2-aesni-no-device.txt": dict(
        release="13.1-RELEASE", arch="i386", ident="GENERIC", aesni=False, sha=False, driver="aesni",
        state="no-device", attached=False, compiled_in=True, persisted=True, findings=["cpu-no-aesni"],
        absent=["driver-unknown", "driver-not-attached"], verdict="ok"),
    # Pentium II on 12.2 i386: no Features2 line -> no AES-NI; the last of two boots is cut short, and 12.x
    # GENERIC lacks aesni, so whether aesni.ko is loaded is unknown -- but there is nothing for it to do.
    "bsdhw-12.2-i386-pentium2-no-features2-two-boots.txt": dict(
        release="12.2-RELEASE-p1", arch="i386", ident="GENERIC", aesni=False, sha=False, driver="aesni",
        state="unknown", findings=["cpu-no-aesni"], absent=["not-loaded-at-boot"]),
    # arm64 13.1 GENERIC: armv8crypto is compiled in and attached with AES-GCM (ISAR0 has AES+PMULL).
    "bsdhw-13.1-arm64-cortex-a53-armv8crypto.txt": dict(
        release="13.1-RELEASE", arch="aarch64", ident="GENERIC", aesni=True, driver="armv8crypto",
        state="builtin", attached=True, compiled_in=True, at_boot=True, persisted=True, verdict="ok"),
    # Raspberry Pi 4 (BCM2711, Cortex-A72 without the crypto extensions): "CPU lacks AES instructions".
    # The build path is redacted, so compiled in vs module stays unknown; AES in software either way.
    "bsdhw-13.0-arm64-rpi4-armv8crypto-lacks-aes.txt": dict(
        release="13.0-RELEASE", arch="aarch64", ident=None, aesni=False, driver="armv8crypto",
        attached=False, at_boot=True, findings=["cpu-no-aesni"]),
    # ossl is not in GENERIC: ossl0 attached before the root mount means ossl.ko was preloaded; aesni is
    # compiled into 13.x GENERIC. GELI on accelerated software (13.0+ wording for aesni/ossl).
    "bsdhw-13.1-ryzen-5500u-aesni-ossl0-preloaded.txt": dict(
        release="13.1-RELEASE-p3", arch="amd64", ident="GENERIC", aesni=True, sha=True, driver="aesni",
        state="builtin", attached=True, compiled_in=True, persisted=True, others={"ossl": "loaded"},
        geli={"nvd0p4.eli": "accelerated software", "nvd0p3.eli": "accelerated software"}, verdict="ok"),
    # Five boots in one buffer, the first cut at the top: only the last counts, and ossl0 attached in an
    # earlier boot only, so it is not reported; the redacted path leaves aesni's origin unknown.
    "bsdhw-13.0-i7-1065g7-ossl0-in-earlier-boot-only.txt": dict(
        release="13.0-RELEASE", arch="amd64", ident=None, aesni=True, sha=True, driver="aesni",
        state="unknown", attached=True, others={}, geli={"ada0p4.eli": "accelerated software"},
        findings=["driver-unknown"]),
    # GELI `accelerated software` on 13.0 with an AES-NI CPU without SHA: the provider is accelerated.
    "bsdhw-13.0-imac12-i5-2400-geli-accelerated-software.txt": dict(
        release="13.0-RELEASE-p3", arch="amd64", aesni=True, sha=False, driver="aesni", attached=True,
        geli={"ada0p4.eli": "accelerated software"}, absent=["geli-software"]),
    # 15.0-CURRENT GENERIC (annotated by its author with '#' lines): aesni compiled in and attached.
    "freebsd-ask-15.0-current-n100-annotated.txt": dict(
        release="15.0-CURRENT", arch="amd64", ident="GENERIC", aesni=True, sha=True, vm=False, driver="aesni",
        state="builtin", attached=True, compiled_in=True, persisted=True, verdict="ok"),
    # 14.2-RELEASE GENERIC (releng/14.2 banner, one line) on an N100 board: aesni is compiled into 13.0+
    # GENERIC and attached with SHA (no "on motherboard": not a module); bare metal (no HV bit, no
    # Hypervisor line, AMI ACPI tables, root mounted); nothing to do, so ok.
    "freebsd-ask-14.2-n100-radxa-x4-aesni-builtin.txt": dict(
        release="14.2-RELEASE", arch="amd64", ident="GENERIC", aesni=True, sha=True, vm=False, hv=None,
        driver="aesni", state="builtin", attached=True, compiled_in=True, at_boot=True, persisted=True,
        geli={}, others={}, absent=["driver-unknown", "persist-unknown"], verdict="ok"),
    # 15.0-CURRENT GENERIC arm64 on a Raspberry Pi 5 (Cortex-A76, unlike the Pi 4's A72, has the crypto
    # extensions: ISAR0 AES+PMULL, SHA1, SHA2): armv8crypto compiled into arm64 GENERIC and attached
    # before the root mount, so builtin and persisted. arm64 has no CPUID HV bit: VM or not stays unknown.
    "freebsd-ask-15.0-current-arm64-rpi5-armv8crypto.txt": dict(
        release="15.0-CURRENT", arch="aarch64", ident="GENERIC", aesni=True, sha=True, vm=None,
        driver="armv8crypto", state="builtin", attached=True, compiled_in=True, at_boot=True, persisted=True,
        others={}, geli={}, absent=["cpu-no-aesni", "driver-unknown"], verdict="ok"),
    # Five device lines of a VMware guest's dmesg.boot: the virtual NVMe disk's vendor string names VMware;
    # no banner, CPU or driver lines, so the release, AES-NI and the driver stay unknown.
    "freebsd-ask-vmware-nvme-disk-excerpt.txt": dict(
        release=None, arch=None, aesni=None, vm=True, hv="vmware", driver=None, state="unknown",
        persisted=None, verdict="unknown"),
    # pfSense 2.4.3 (11.1-p7, kernel config "pfSense") as a Xen HVM guest: XEN version line and the
    # XenVMMXenVMM CPUID origin; AES-NI passed through (AESNI with HV), no SHA. No aesni0 in the boot,
    # but the kernel is an appliance's, so whether aesni is in it or on disk is unknown.
    "3mdeb-pfsense-2.4.3-xen-4.8-hvm-console.txt": dict(
        release="11.1-RELEASE-p7", arch="amd64", ident="pfSense", aesni=True, sha=False, vm=True, hv="xen",
        driver="aesni", state="unknown", compiled_in=None, persisted=None, findings=["driver-unknown"],
        absent=["vm-hides-aesni", "cpu-no-aesni"], verdict="unknown"),
    # Plain 11.1 GENERIC on EC2 (Xen 4.2 HVM): the XEN line and the XenVMMXenVMM CPUID origin name Xen;
    # Xen passes AES-NI through (AESNI next to HV), no SHA. The excerpt ends before the devices, so
    # whether aesni.ko (not in 11.x GENERIC) was loaded is unknown, not "missing".
    "bsdploy115-11.1-ec2-xen-4.2-xenvmm-excerpt.txt": dict(
        release="11.1-RELEASE", arch="amd64", ident="GENERIC", aesni=True, sha=False, vm=True, hv="xen",
        driver="aesni", state="unknown", at_boot=None, persisted=None, findings=["driver-unknown"],
        absent=["vm-hides-aesni", "not-loaded-at-boot", "driver-not-loaded"], verdict="unknown"),
    # Plain 10.3 GENERIC on EC2 (Xen 4.2): the banner and the XEN line, then the author's snip. Xen is
    # certain; the CPU block was cut, so AES-NI is unknown, and 10.x GENERIC lacks aesni, so whether
    # aesni.ko was loaded is unknown too (no complete boot: the snip proves nothing).
    "nomadlogic-10.3-ec2-xen-4.2-banner-excerpt.txt": dict(
        release="10.3-RELEASE", arch="amd64", ident="GENERIC", aesni=None, vm=True, hv="xen", driver="aesni",
        state="unknown", at_boot=None, persisted=None, findings=["driver-unknown"],
        absent=["not-loaded-at-boot", "cpu-no-aesni"], verdict="unknown"),
    # Hyper-V masks AESNI (Features2 only SSE3,CX16,HV): no driver can help; the advice names Hyper-V's
    # processor compatibility setting, not a generic "CPU passthrough".
    "hyperv-12.1-rbxcloud-e5-2673v3-aesni-hidden-excerpt.txt": dict(
        release="12.1-RELEASE", arch="amd64", ident="GENERIC", aesni=False, vm=True, hv="hv",
        findings=["vm-hides-aesni"], remedy=("vm-hides-aesni", "Hyper-V")),
    # VirtualBox 10.2 guest without the HV bit or a CPUID origin: the ACPI ids and VBOX disks name the
    # hypervisor. A complete boot of 10.2 GENERIC (no aesni) shows no aesni0: the loader did not load it.
    "virtualbox-10.2-i7-3537u-no-hv-bit.txt": dict(
        release="10.2-RELEASE", arch="amd64", ident="GENERIC", aesni=True, vm=True, hv="vbox", driver="aesni",
        state="unknown", at_boot=False, persisted=None, findings=["not-loaded-at-boot", "driver-unknown"]),
    # kldstat | grep and kldstat -v | grep: aesni.ko holds nexus/aesni -> loaded from the module; the
    # release, CPU and loader.conf are not shown (`kldstat -m aesni` failing is not the module list).
    "shared-ansible-kld-issue6-aesni-module-grep.txt": dict(
        release=None, arch=None, aesni=None, driver="aesni", state="loaded", compiled_in=False, persisted=None),
    # geli list alone: the provider is on software crypto; with no CPU or driver shown, whether anything
    # could accelerate it is unknown, so no re-attach advice.
    "shared-bsdnow-feedback-13.0-sw.txt": dict(
        release=None, aesni=None, geli={"ada0p2.eli": "software"}, absent=["geli-software"]),
    # uname -a alone (after a '# ' root prompt): release, arch and GENERIC; the driver is unknown.
    "shared-bsdnow425-uname-a-12.2-p7-with-pkg-info.txt": dict(
        release="12.2-RELEASE-p7", arch="amd64", ident="GENERIC", aesni=None, driver="aesni", state="unknown",
        persisted=None, findings=["driver-unknown"], verdict="unknown"),
}


def _status(name: str) -> Status:
    data = (PASTES / name).read_bytes()
    body = data.split(b"\n# ---\n", 1)[1]
    [c] = collect_file(name, body)
    assert c.evidence is not None and c.source == f"paste:{name}", c.error
    return to_status(c)


def test_every_paste_fixture_has_a_case() -> None:
    assert {p.name for p in PASTES.glob("*.txt")} == set(CASES)
    assert len(CASES) >= 15


def test_every_paste_fixture_names_its_source() -> None:
    for p in PASTES.glob("*.txt"):
        head = p.read_text(errors="replace").splitlines()[:3]
        assert head[0].startswith("# source: ") and ("https://" in head[0] or "shared/real-outputs/" in head[0])
        assert head[1].startswith("# context: ") and head[2] == "# ---"


FIELDS = {
    "release": lambda s: s.os.release, "arch": lambda s: s.os.arch, "ident": lambda s: s.os.kernel_ident,
    "aesni": lambda s: s.cpu.aesni, "sha": lambda s: s.cpu.sha, "vm": lambda s: s.cpu.vm,
    "hv": lambda s: s.cpu.hypervisor, "driver": lambda s: s.driver.name, "state": lambda s: s.driver.state,
    "attached": lambda s: s.driver.attached, "compiled_in": lambda s: s.driver.compiled_in,
    "at_boot": lambda s: s.driver.at_boot, "persisted": lambda s: s.persist.configured,
    "geli": lambda s: {g.name: g.crypto for g in s.geli},
    "others": lambda s: {d.name: d.state for d in s.other_drivers}, "verdict": lambda s: s.verdict,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_expert_reading_of_a_real_paste(name: str) -> None:
    exp = CASES[name]
    s = _status(name)
    for key, get in FIELDS.items():
        if key in exp:
            assert get(s) == exp[key], f"{key}: {get(s)!r} != {exp[key]!r}"
    ids = {f.id for f in s.findings}
    assert set(exp.get("findings", ())) <= ids, sorted(ids)
    assert not set(exp.get("absent", ())) & ids, sorted(ids)
    assert "paste-partial" in ids  # every paste report says what was not pasted
    if "remedy" in exp:
        fid, text = exp["remedy"]
        assert text in next(f.remedy for f in s.findings if f.id == fid)
