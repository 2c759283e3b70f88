"""The CPU: AES-NI and SHA (x86 Features2, arm64 ID registers, an attached driver), and any hypervisor."""

from __future__ import annotations

from bsdcrypt.parse import HostFacts
from bsdcrypt.platform import ARM64, X86
from bsdcrypt.status import CPUInfo

# CPUID 0x40000000 vendor signatures (sys/x86/x86/identcpu.c) -> kern.vm_guest names.
HV_VENDORS = {
    "KVMKVMKVM": "kvm",
    "bhyve bhyve": "bhyve",
    "Microsoft Hv": "hv",
    "XenVMMXenVMM": "xen",
    "VMwareVMware": "vmware",
    "VBoxVBoxVBox": "vbox",
    "___ NVMM ___": "nvmm",
    "TCGTCGTCGTCG": "qemu-tcg",
}


def cpu_info(f: HostFacts, arch: str | None, major: int | None = None) -> CPUInfo:
    sysctl, dev, dmesg = f.sysctl, f.dev or {}, f.dmesg
    cpu = dmesg.cpu
    aes: bool | None = None
    sha: bool | None = None
    # arm64's ID registers without a banner naming the machine (a wrapped dmesg): only arm64 prints them
    if arch in ARM64 or arch is None and cpu.isa0 is not None and cpu.features2 is None:
        if cpu.isa0 is not None:
            aes = "AES" in cpu.isa0 or any(f.startswith("AES") for f in cpu.isa0)
            sha = any(f.startswith("SHA") for f in cpu.isa0)
    else:
        if cpu.features2 is not None:
            aes = "AESNI" in cpu.features2
        elif cpu.no_features2 and arch in (X86 | {None}):
            aes = False  # identcpu.c prints Features2 only when CPUID.1:ECX is non-zero (AESNI is bit 25)
        if cpu.stdext is not None:
            sha = "SHA" in cpu.stdext
        elif cpu.block_complete and (cpu.features2 is not None or aes is False and cpu.no_features2):
            # identcpu.c prints no Structured Extended Features line when there are none (a paste cut
            # before the CPU block's end shows nothing of the kind)
            sha = False
    # An attached driver is proof of what the CPU offers, whatever dmesg kept. Its lack of SHA proves
    # nothing about the CPU for armv8crypto (never offers SHA) nor for aesni before 12.0 (SHA came then).
    for msg in dmesg.drivers:
        if msg.driver in ("aesni", "armv8crypto") and msg.attached and not msg.algorithms:
            # its line cut inside the description: armv8crypto attaches only with AES, aesni with AES or SHA
            aes = True if aes is None and msg.driver == "armv8crypto" else aes
        elif msg.driver in ("aesni", "armv8crypto") and msg.attached:
            aes = any(a.startswith("AES") for a in msg.algorithms) if aes is None else aes
            offers_sha = any(a.startswith("SHA") for a in msg.algorithms)
            if sha is None and (offers_sha or msg.driver == "aesni" and major is not None and major >= 12):
                sha = offers_sha
    desc = sysctl.get("dev.aesni.0.%desc") or dev.get("dev.aesni.0.%desc")
    if desc:
        aes = aes or "AES-" in desc
        sha = sha or "SHA" in desc
    vm_guest = sysctl.get("kern.vm_guest")
    hv_vendor = sysctl.get("hw.hv_vendor") or cpu.hypervisor
    # SMBIOS strings (kenv) and ACPI/device strings in dmesg name hypervisors that set no CPUID
    # signature (VirtualBox, QEMU TCG) or releases whose kern.vm_guest says only "generic"
    named = f.smbios_hypervisor or dmesg.vm_hint
    in_vm: bool | None = None
    if vm_guest is not None:
        in_vm = vm_guest != "none"
    if cpu.features2 is not None and "HV" in cpu.features2 or cpu.hypervisor or named:
        in_vm = True
    elif in_vm is None and cpu.features2 is not None and (
        f.kenv_shown or dmesg.root_mounted
    ):
        # no HV bit, no CPUID origin, and no hypervisor's SMBIOS strings, or none of their ACPI,
        # disk or NIC names in a boot whose device probe is complete
        in_vm = False
    hypervisor = None
    if in_vm:
        vendor = (hv_vendor or "").strip()
        hypervisor = (
            (vm_guest if vm_guest not in (None, "none", "generic") else None)
            or HV_VENDORS.get(vendor)
            or named
            or vendor
            or vm_guest
            or "unknown"
        )
    return CPUInfo(
        model=sysctl.get("hw.model") or cpu.model,
        aesni=aes,
        sha=sha,
        vm=in_vm,
        hypervisor=hypervisor,
    )
