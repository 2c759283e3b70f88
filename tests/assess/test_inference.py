"""Issue 27 part 3, reasoning to the end: where every explanation of the evidence gives the same answer,
bsdcrypt gives it (marked inferred) instead of "unknown". One test per rule, each with its reasoning."""

from __future__ import annotations

from pathlib import Path

from bsdcrypt.assess import assess
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.probe import Evidence, File, Step, file_step

HOSTS = Path(__file__).resolve().parents[2] / "fixtures" / "hosts"
ARM64 = "freebsd-14.0-current-arm64-rk3399-armv8crypto-builtin"  # a real RK3399 board: bare metal


def _arm64(extra_dmesg: bytes = b"", **steps: Step) -> Evidence:
    ev = ReplayHost.from_file(HOSTS / f"{ARM64}.yaml").evidence
    merged = dict(ev.steps)
    dm = merged[file_step(File.DMESG_BOOT)]
    merged[file_step(File.DMESG_BOOT)] = Step(dm.rc, dm.out + extra_dmesg)
    merged.update(steps)
    return Evidence(merged)


def test_arm64_bare_metal_stays_bare_metal() -> None:
    s = assess(_arm64(), "h", "t")
    assert s.os.arch == "aarch64" and s.cpu.vm is not True


def test_arm64_guest_shown_by_vmwares_pci_vendor() -> None:
    # arm64 has no CPUID hypervisor leaf, so no `Hypervisor: Origin` line: a guest shows itself only by
    # its virtual devices. 0x15ad is VMware's PCI vendor id; a verbose boot lists every PCI function as
    # "found->\tvendor=0x%04x, dev=0x%04x, revid=0x%02x" (sys/dev/pci/pci.c pci_print_verbose; the device
    # and revision here are illustrative). No bare-metal board carries VMware's vendor id.
    s = assess(_arm64(b"found->\tvendor=0x15ad, dev=0x07b0, revid=0x01\n"), "h", "t")
    assert s.cpu.vm is True and s.cpu.hypervisor == "vmware"


def test_arm64_guest_shown_by_qemus_virt_board() -> None:
    # QEMU's arm64 `virt` board sets SMBIOS maker "QEMU" and product "QEMU Virtual Machine" ("KVM Virtual
    # Machine" under KVM) (qemu hw/arm/virt.c virt_build_smbios: smbios_set_defaults("QEMU", product, ...));
    # with ACPI its tables carry the BOCHS/BXPC OEM ids that acpi0 prints. Either names the hypervisor.
    for product, hv in ((b"QEMU Virtual Machine", "qemu"), (b"KVM Virtual Machine", "kvm")):
        kenv = Step(0, b"smbios.system.maker=QEMU\nsmbios.system.product=" + product + b"\nsmbios.bios.vendor=\n")
        s = assess(_arm64(kenv_smbios=kenv), "h", "t")
        assert s.cpu.vm is True and s.cpu.hypervisor == hv
    s = assess(_arm64(b"acpi0: <BOCHS BXPC>\n"), "h", "t")
    assert s.cpu.vm is True and s.cpu.hypervisor == "qemu"
