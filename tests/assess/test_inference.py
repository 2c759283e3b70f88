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


# --- the driver and persistence rules -----------------------------------------------------------------

PASTES = Path(__file__).resolve().parents[2] / "fixtures" / "pastes"
PARSERS = Path(__file__).resolve().parents[2] / "fixtures" / "parsers"


def _paste(name: str):  # type: ignore[no-untyped-def]
    from bsdcrypt.collect.analyze import collect_file, to_status

    body = (PASTES / name).read_bytes().split(b"\n# ---\n", 1)[1]
    [c] = collect_file(name, body)
    return to_status(c)


def test_a_driver_in_the_boot_autoconfiguration_is_persisted() -> None:
    # aesni0 attached before "Trying to mount root": compiled into the kernel, or preloaded by the loader
    # from its configuration. The kernel's config is not shown (redacted build path), so which is unknown,
    # but both explanations give the same answer: it is there at every boot. Persisted, inferred.
    s = _paste("bsdhw-11.4-i7-7700-aesni-early-path-redacted.txt")
    assert s.driver.state == "unknown" and s.persist.configured is True
    assert s.persist.inferred and "autoconfiguration" in s.persist.inferred
    assert "persist-unknown" not in {f.id for f in s.findings}


def test_an_appliance_with_the_module_loaded_persists_it_by_its_setting() -> None:
    # pfSense/OPNsense load crypto modules at boot from their own setting (config.xml), never from a
    # loader.conf line they do not write; the module is loaded and no loader.conf line loads it, so the
    # setting selects it. config.xml is root-only: persisted by the appliance, inferred, not seen.
    for name in ("pfsense-2.4.5-i5-4590s-loaded", "opnsense-20.7-hbsd12.1-i5-6200u-loaded"):
        s = assess(ReplayHost.from_file(HOSTS / f"{name}.yaml").evidence, "h", "t")
        assert s.persist.configured is True and s.persist.source == "appliance setting (inferred)"
        assert s.persist.inferred and "crypto setting" in s.persist.inferred
        f = next(x for x in s.findings if x.id == "appliance-managed")
        assert "inferred from the module being loaded" in f.message


def _uname_kldstat_geli() -> str:
    uname = (PASTES / "shared-bsdnow425-uname-a-12.2-p7-with-pkg-info.txt").read_text().split("# ---\n", 1)[1]
    kld = (PARSERS / "kldstat" / "nanxiao-kldstat-v-truncated.txt").read_text().split("# ---\n", 1)[1]
    plain = kld.split("\n\n", 1)[0] + "\n"  # its plain `kldstat`: kernel, fdescfs.ko, uhid.ko
    geli = (PARSERS / "geli" / "bsdnow-feedback-13.0-sw.txt").read_text().split("# ---\n", 1)[1]
    return uname.splitlines()[0] + "\n" + uname.splitlines()[1] + "\n" + plain + geli


def test_a_12x_generic_paste_without_aesni_ko_in_plain_kldstat_is_not_loaded() -> None:
    # A paste put together from real outputs of different hosts: 12.2-RELEASE-p7 GENERIC (uname -a), a
    # plain `kldstat` without aesni.ko, a GELI provider on `Crypto: software`. Plain kldstat lists every
    # file loaded; 12.x GENERIC does not compile aesni in; so aesni could only be aesni.ko, which is not
    # listed: not loaded (and GELI on software agrees). /boot/kernel/aesni.ko ships with that GENERIC.
    from bsdcrypt.collect.paste import evidence_from_paste

    ev = evidence_from_paste(_uname_kldstat_geli())
    assert ev is not None
    s = assess(ev, "p", "paste")
    assert (s.os.release, s.os.kernel_ident) == ("12.2-RELEASE-p7", "GENERIC")
    assert s.driver.state == "not-loaded" and s.driver.inferred and "plain kldstat" in s.driver.inferred
    # the CPU is unknown (no dmesg): the finding names the one command that settles it
    f = next(x for x in s.findings if x.id == "driver-not-loaded")
    assert f.severity in ("unknown", "critical") and "grep -w AESNI /var/run/dmesg.boot" in f.remedy


def test_armv8crypto_that_lacks_aes_is_no_device() -> None:
    # "armv8crypto0: CPU lacks AES instructions" is the driver's probe speaking: it is in the kernel
    # (compiled in or loaded: the redacted build path does not say) and attached nothing. Both give the
    # same state: no-device, inferred.
    s = _paste("bsdhw-13.0-arm64-rpi4-armv8crypto-lacks-aes.txt")
    assert s.driver.name == "armv8crypto" and s.driver.state == "no-device" and s.driver.attached is False
    assert s.driver.inferred and "CPU lacks AES instructions" in s.driver.inferred
