"""Pure assessment: evidence from the probe -> Status with findings.

Nothing here runs commands or knows which kind of host the evidence came from.
The reasoning behind every finding is in docs/findings.md.
"""

from __future__ import annotations

import re
from dataclasses import replace

import bsdcrypt.assess.findings as advice
import bsdcrypt.assess.userland as userland
from bsdcrypt.facts import DmesgBoot, DriverMessage, GeliProvider, KldFile
from bsdcrypt.loader.conf import LOADER_CONF_DIR, all_assignments, files_from_evidence, is_yes
from bsdcrypt.loader.model import DEVICE_HINTS, GENERATION_NAMES, Outcome, agree, needed, outcomes
from bsdcrypt.parsers.dmesg import parse_dmesg
from bsdcrypt.parsers.geli import parse_geli_list
from bsdcrypt.parsers.kenv import parse_kenv, smbios_hypervisor
from bsdcrypt.parsers.kldstat import file_containing, parse_kldstat
from bsdcrypt.parsers.linux import parse_cpuinfo_flags, parse_cpuinfo_model
from bsdcrypt.parsers.osrelease import parse_os_release, parse_product
from bsdcrypt.parsers.sysctl import parse_sysctl
from bsdcrypt.parsers.version import parse_freebsd_version, parse_release, parse_uname_a
from bsdcrypt.platform import (
    AES_DRIVERS,
    APPLIANCES,
    ARM64,
    FREEBSD_FAMILY,
    GUI_LOADED,
    KERNEL_DRIVERS,
    X86,
    primary_driver,
)
from bsdcrypt.probe import EXISTS_PREFIX, FILE_PREFIX, Evidence, File, StepName, dir_step, file_step, kldstat_m_step
from bsdcrypt.status import CPUInfo, DriverInfo, Finding, GeliInfo, OSInfo, PersistInfo, Status

# Steps without which the driver, persistence or GELI conclusions cannot be trusted.
DECISIVE_STEPS = (
    StepName.SYSCTL,
    StepName.SYSCTL_DEV,
    StepName.KLDSTAT_V,
    kldstat_m_step("aesni"),
    file_step(File.DMESG_BOOT),
    file_step(File.LOADER_CONF),
    StepName.GELI_LIST,
)
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


def _raw(ev: Evidence, name: str) -> str:
    """Output of a step whatever its exit status (sysctl exits 1 if any OID is unknown)."""
    st = ev.step(name)
    return st.text if st is not None else ""


def _file_text(ev: Evidence, path: str) -> str | None:
    data = ev.file(path)
    return data.decode("utf-8", errors="replace") if data is not None else None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def assess(ev: Evidence, host: str, source: str) -> Status:
    status = Status(host=host, source=source)
    sysctl = parse_sysctl(_raw(ev, StepName.SYSCTL))
    dmesg = _dmesg(ev)
    uname_s = (ev.text(StepName.UNAME_S) or "").strip() or sysctl.get("kern.ostype") or dmesg.os_name
    status.root = None if ev.text(StepName.ID_U) is None else (ev.text(StepName.ID_U) or "").strip() == "0"

    if uname_s == "Linux":
        _assess_linux(ev, status)
        return status
    # a paste of kldstat or geli list alone names no system: FreeBSD-family tools, the OS stays unknown
    unnamed_paste = ev.origin == "paste" and not uname_s
    if uname_s not in FREEBSD_FAMILY and not unnamed_paste:
        # OpenBSD, NetBSD, DragonFly and macOS have kern.osrelease too: only uname -s tells.
        status.os.name = uname_s or None
        what = f"{uname_s}" if uname_s else "no operating system bsdcrypt recognises"
        status.findings.append(
            Finding(
                "unknown-os",
                "unknown",
                f"The probe found {what}: this is not a FreeBSD-family host (FreeBSD, HardenedBSD, "
                "MidnightBSD or an appliance built on them).",
                "Run bsdcrypt against a FreeBSD, HardenedBSD or FreeBSD-based appliance host.",
            )
        )
        return status

    status.os = _os_info(ev, sysctl, dmesg, uname_s)
    dev = _sysctl_dev(ev)
    status.cpu = _cpu_info(ev, sysctl, dev, dmesg, status.os.arch, status.os.major)
    drivers = _driver_infos(ev, dev, dmesg, status.os, status.cpu)
    status.driver = drivers[0]
    status.other_drivers = drivers[1:]
    status.persist = _persist_info(ev, status.driver, status.cpu, status.os, dmesg)
    # geli list shows the providers now; without it, the ones attached during boot (with the crypto
    # path they got then) are what dmesg.boot shows
    if ev.step(StepName.GELI_LIST) is not None or ev.origin != "paste":
        providers = parse_geli_list(_raw(ev, StepName.GELI_LIST))
    else:
        providers = list(dmesg.geli)
    status.geli = _geli_infos(providers, status)
    status.userland_aes = userland.userland_info(ev, status.cpu, status.os.arch)
    status.findings = advice.findings(status) + userland.findings(status)
    missing = [name for name in DECISIVE_STEPS if name not in ev.steps]
    if ev.origin == "paste":
        status.findings.append(_paste_finding(ev, status))
    elif missing:
        status.findings.append(
            Finding(
                "probe-partial",
                "unknown",
                f"The probe output lacks {', '.join(missing)} (cut off?): the conclusions above may be incomplete.",
                "Run the probe again (`bsdcrypt record -o host.yaml` on the host) and check that it finishes.",
            )
        )
    return status


# What each pasted output decides, for the paste-partial finding (docs/analyze.md has the full table).
PASTE_PARTS = (
    (StepName.KLDSTAT_V, "kldstat -v", "whether the driver is compiled in, loaded or absent now"),
    (file_step(File.LOADER_CONF), "/boot/loader.conf (and .local, loader.conf.d)", "whether it is persisted"),
    (StepName.GELI_LIST, "geli list", "the GELI providers' crypto path now"),
    (StepName.SYSCTL_DEV, "sysctl dev.aesni", "whether aesni0 is attached now"),
)


def _told_instead(step: str, status: Status) -> str | None:
    """What the other parts of a paste decided in place of a part that was not pasted, if anything."""
    d, p = status.driver, status.persist
    if step == StepName.KLDSTAT_V and d.name and d.state != "unknown":
        return f"{d.name} {d.state}, told from dmesg.boot"
    if step == file_step(File.LOADER_CONF) and p.configured is not None:
        return "compiled in, told from dmesg.boot" if p.source in (None, "kernel") else f"told from {p.source}"
    if step == StepName.GELI_LIST and status.geli:
        return "the providers attached at boot, from dmesg.boot"
    if step == StepName.SYSCTL_DEV and d.attached is not None:
        return "as at boot, from dmesg.boot"
    return None


def _paste_finding(ev: Evidence, status: Status) -> Finding:
    seen = [label for step, label in (
        (file_step(File.DMESG_BOOT), "dmesg"), (StepName.DMESG_FILTERED, "filtered dmesg"),
        (StepName.KLDSTAT_V, "kldstat"), (StepName.KLDSTAT_FILTERED, "filtered kldstat"),
        (StepName.UNAME_A, "uname -a"), (StepName.GELI_LIST, "geli list"), (StepName.SYSCTL, "sysctl"),
        (StepName.KENV_SMBIOS, "kenv"),
    ) if step in ev.steps] + sorted(k[len(FILE_PREFIX):] for k in ev.steps if k.startswith(file_step("/boot/")))
    lacking = []
    for step, label, what in PASTE_PARTS:
        if step not in ev.steps:
            instead = _told_instead(step, status)
            lacking.append(f"{label} ({what}{'; here ' + instead if instead else ''})")
    message = f"Assessed from a paste of {', '.join(seen)}"
    message += f"; not pasted: {'; '.join(lacking)}: what only they show stays unknown." if lacking else "."
    return Finding(
        "paste-partial",
        "info",  # what stays unknown carries its own unknown finding (driver-unknown, persist-unknown)
        message,
        "For a full report run `bsdcrypt status` on the host, or `sh probe.sh` from `bsdcrypt probe-script` "
        "and `bsdcrypt analyze` its output.",
    )


def _dmesg(ev: Evidence) -> DmesgBoot:
    """The last boot of dmesg.boot; a filtered paste (`dmesg | grep ...`) only for what its lines show."""
    text = _file_text(ev, File.DMESG_BOOT)
    if text is not None:
        return parse_dmesg(text)
    filtered = ev.text(StepName.DMESG_FILTERED)
    if filtered is None:
        return parse_dmesg("")
    d = parse_dmesg(filtered)
    # a grep drops lines, so nothing may be concluded from a line's absence
    drivers = tuple(replace(m, before_root=None) for m in d.drivers)
    return replace(
        d, cpu=replace(d.cpu, no_features2=False, block_complete=False), drivers=drivers, root_mounted=False, geli=()
    )


def _os_info(ev: Evidence, sysctl: dict[str, str], dmesg: DmesgBoot, uname_s: str | None) -> OSInfo:
    osr = parse_os_release(_file_text(ev, File.RUN_OS_RELEASE) or "")
    product = parse_product(
        _file_text(ev, File.PLATFORM),
        _file_text(ev, File.VERSION),
        ev.text(StepName.OPNSENSE_VERSION),
        ev.text(StepName.GHOSTBSD_VERSION),
        _file_text(ev, File.PFSENSE_RELEASE),
    )
    release_text = sysctl.get("kern.osrelease") or ""
    release = parse_release(release_text) if release_text else None
    if release is None and dmesg.banner:
        parts = dmesg.banner.split()
        release = parse_release(parts[1]) if len(parts) > 1 else None
    uname = parse_uname_a(ev.text(StepName.UNAME_A) or "")
    if release is None and uname.get("release"):
        release = parse_release(uname["release"])
    hbsd = (
        "hardening.version" in sysctl
        or (release is not None and release.hbsd)
        or dmesg.hardenedbsd
    )
    name = uname_s or dmesg.os_name
    base = "hardenedbsd" if hbsd else ("midnightbsd" if name == "MidnightBSD" else "freebsd")
    info = OSInfo(
        name=name,
        variant=product.variant if product else base,
        base=base,
        product=f"{product.name} {product.version}".strip() if product and product.version else None,
        release=release.raw if release else (release_text or None),
        major=release.major if release else None,
        minor=release.minor if release else None,
        branch=release.branch if release else None,
        patch=release.patch if release else None,
        userland=parse_freebsd_version(ev.text(StepName.FREEBSD_VERSION_U) or "") or osr.get("VERSION"),
        kernel_installed=parse_freebsd_version(ev.text(StepName.FREEBSD_VERSION_K) or ""),
        osreldate=_int(sysctl.get("kern.osreldate")),
        # the running kernel's own words first; dmesg.boot's banner is the same boot's
        arch=sysctl.get("hw.machine_arch") or _machine_arch(uname.get("machine") or dmesg.arch),
        kernel_ident=sysctl.get("kern.ident") or uname.get("ident") or dmesg.kernel_ident,
    )
    if product and not info.product:
        info.product = product.name
    return info


def _machine_arch(machine: str | None) -> str | None:
    """uname -m / the banner give MACHINE; hw.machine_arch of arm64 is aarch64 (amd64, i386: the same)."""
    return {"arm64": "aarch64"}.get(machine or "", machine)


def _cpu_info(
    ev: Evidence, sysctl: dict[str, str], dev: dict[str, str], dmesg: DmesgBoot, arch: str | None,
    major: int | None = None,
) -> CPUInfo:
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
    named = smbios_hypervisor(parse_kenv(_raw(ev, StepName.KENV_SMBIOS))) or dmesg.vm_hint
    in_vm: bool | None = None
    if vm_guest is not None:
        in_vm = vm_guest != "none"
    if cpu.features2 is not None and "HV" in cpu.features2 or cpu.hypervisor or named:
        in_vm = True
    elif in_vm is None and cpu.features2 is not None and (
        ev.step(StepName.KENV_SMBIOS) is not None or dmesg.root_mounted
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


def _sysctl_dev(ev: Evidence) -> dict[str, str]:
    return parse_sysctl(_raw(ev, StepName.SYSCTL_DEV))


# Appliances build their own kernel config (platform.APPLIANCES): their stock kernel is that one, not
# GENERIC or HARDENEDBSD.
STOCK_IDENTS = ("GENERIC", "HARDENEDBSD")


def in_generic(
    driver: str, os: OSInfo, compiled_in: bool | None = None, appliance_possible: bool = False
) -> bool | None:
    """Does this release's stock kernel compile the driver in?

    The stock kernel is GENERIC (aesni and armv8crypto from 13.0), HardenedBSD's HARDENEDBSD (aesni since
    10), or an appliance's own kernel, whose config bsdcrypt does not know: there the running kernel is the
    evidence (`compiled_in`: nexus/aesni under `kernel` in kldstat -v, or not: loaded from aesni.ko or not
    registered). OPNsense 20.7/21.1 run HardenedBSD 12.1 with their own SMP kernel, which loads aesni.ko.
    `appliance_possible`: the files that name an appliance were not collected, so a kernel that is not
    GENERIC may be one.
    """
    if os.major is None:
        return None
    ident = (os.kernel_ident or "").upper()
    if (os.variant in APPLIANCES or appliance_possible) and not ident.startswith(STOCK_IDENTS):
        return compiled_in  # the appliance's own config, which bsdcrypt does not know; None if not seen
    if driver == "aesni" and os.base == "hardenedbsd":
        return os.major >= 10
    if driver in AES_DRIVERS:
        return os.major >= 13
    return False


def _driver_infos(
    ev: Evidence, dev: dict[str, str], dmesg: DmesgBoot, os: OSInfo, cpu: CPUInfo
) -> list[DriverInfo]:
    kld = parse_kldstat(_raw(ev, StepName.KLDSTAT_V)) if ev.step(StepName.KLDSTAT_V) is not None else []
    primary = primary_driver(os.arch)
    if primary is None and os.arch is None:
        # architecture not shown (a kldstat paste): aesni.ko exists only on x86, armv8crypto on arm64
        primary = next((d for d in AES_DRIVERS if _registered(ev, d, kld) or _last_message(dmesg, d)), None)
    infos: list[DriverInfo] = []
    for name in KERNEL_DRIVERS:
        info = _driver_info(name, ev, kld, dev, dmesg, os)
        if info.attached is None and info.state in ("builtin", "loaded") and _cannot_attach(name, cpu):
            # aesni_probe needs AESNI or SHA, armv8_crypto_probe needs AES: this CPU has neither
            info.attached, info.accelerates_aes, info.state = False, False, "no-device"
        if name == "ossl" and info.attached:
            info.algorithms, info.accelerates_aes = ossl_algorithms(os, cpu, dmesg)
        if name == primary:
            infos.insert(0, info)
        elif info.attached:  # other drivers only when they do something (padlock on Intel never attaches)
            infos.append(info)
    if primary is None:
        # an architecture without an AES driver, or one that was not shown
        infos.insert(0, DriverInfo(name=None, state="missing" if os.arch else "unknown"))
    return infos


# What ossl(4) does (sys/crypto/openssl/ossl.c, ossl_probesession/ossl_lookup_cipher). Its device
# description is just "OpenSSL crypto", so the algorithms come from the source of the release:
#   13.0 (@ed0f7721, Mar 2021): SHA1/SHA2 digests and HMACs, Poly1305, ChaCha20, ChaCha20-Poly1305;
#   main from Sept 2021 (ossl.4 @197ff4c3, 14.0): AES-CBC when ossl_cpuid() finds AES (x86: the AESNI
#   CPUID bit; arm64: HWCAP_AES); 14.0 amd64: AES-GCM when the CPU has AVX+PCLMULQDQ+MOVBE or
#   VAES+VPCLMULQDQ (ossl_x86.c; FreeBSD-EN-23:17.ossl fixed it in 14.0). Never AES-XTS, GELI's default.
# Whether stable/13 (13.1+) got AES-CBC is not verified, nor exactly when 14-CURRENT did: accelerates_aes
# is None there. (Checked: freebsd-src's ossl.c @ed0f7721 has no cipher but ChaCha20; a later tree @298b6a0e
# has ossl_lookup_cipher's CRYPTO_AES_CBC case and ossl_aes.c, but nothing in it tells main from stable/13;
# ossl.4 of a 14.0-CURRENT tree (Nevuqe/nqc @c74f302d, newvers.sh 14.0-CURRENT) is dated September 24, 2021
# and lists AES-CBC without AES-GCM, so main had it from about then; no releng/13.x or stable/13 copy of
# sys/crypto/openssl and no 13.x ossl.4 was reachable; the 13.1 release notes do not name ossl. See
# docs/notes.md, issue 15.)
OSSL_BASE = (
    "ChaCha20", "ChaCha20-Poly1305", "Poly1305", "SHA1", "SHA1-HMAC", "SHA2-224", "SHA2-224-HMAC",
    "SHA2-256", "SHA2-256-HMAC", "SHA2-384", "SHA2-384-HMAC", "SHA2-512", "SHA2-512-HMAC",
)


def ossl_algorithms(os: OSInfo, cpu: CPUInfo, dmesg: DmesgBoot) -> tuple[list[str], bool | None]:
    """(algorithms, accelerates_aes) of an attached ossl0 on this release and CPU."""
    algos = list(OSSL_BASE)
    if os.major is None or os.major < 13:
        return algos, None  # ossl first appeared in 13.0: an unknown or odd kernel
    if os.major == 13 and os.minor == 0 and os.branch not in ("STABLE", "PRERELEASE", "CURRENT"):
        return algos, False  # 13.0-RELEASE (or its BETA/RC): no AES in ossl yet
    if os.major == 13 or (os.major == 14 and os.branch == "CURRENT") or cpu.aesni is None:
        return algos, None
    if not cpu.aesni:
        return algos, False
    aes = ["AES-CBC"]
    f2, ext2 = dmesg.cpu.features2 or frozenset(), dmesg.cpu.stdext2 or frozenset()
    if os.arch == "amd64" and ({"AVX", "PCLMULQDQ", "MOVBE"} <= f2 or {"VAES", "VPCLMULQDQ"} <= ext2):
        aes.append("AES-GCM")
    return aes + algos, True


def _registered(ev: Evidence, name: str, kld: list[KldFile]) -> bool | None:
    st = ev.step(kldstat_m_step(name))
    if st is not None and st.rc in (0, 1):
        return st.rc == 0
    if not kld and ev.step(StepName.KLDSTAT_FILTERED) is not None:
        # `kldstat | grep ...` pasted: a line it shows is real, a line it lacks means nothing
        shown = parse_kldstat(_raw(ev, StepName.KLDSTAT_FILTERED))
        seen = file_containing(shown, f"nexus/{name}") is not None or any(f.name == f"{name}.ko" for f in shown)
        return True if seen else None
    if kld and any(f.modules for f in kld):
        return file_containing(kld, f"nexus/{name}") is not None
    if kld and any(f.name == f"{name}.ko" for f in kld):
        return True  # plain kldstat (no -v) lists the module file
    return None  # plain kldstat without it: compiled in or not loaded, it cannot tell


def _cannot_attach(name: str, cpu: CPUInfo) -> bool:
    if name == "aesni":
        return cpu.aesni is False and cpu.sha is False
    if name == "armv8crypto":
        return cpu.aesni is False
    return False


def module_files(ev: Evidence) -> list[str] | None:
    """The crypto .ko files in kern.module_path's directories (the module_files step), None if not run."""
    st = ev.step(StepName.MODULE_FILES)
    if st is None or st.rc != 0:
        return None
    return [line.strip() for line in st.text.splitlines() if line.strip().endswith(".ko")]


def stock_kernel(os: OSInfo) -> bool:
    """The release's own GENERIC (or HardenedBSD's HARDENEDBSD) kernel, by its config name."""
    return (os.kernel_ident or "").upper().startswith(STOCK_IDENTS)


def _driver_info(
    name: str, ev: Evidence, kld: list[KldFile], dev: dict[str, str], dmesg: DmesgBoot, os: OSInfo
) -> DriverInfo:
    ko = f"/boot/kernel/{name}.ko"
    info = DriverInfo(name=name)
    registered = _registered(ev, name, kld)
    # a filtered kldstat paste shows the file holding the module, when it shows it at all
    filtered = StepName.KLDSTAT_FILTERED
    shown = kld or (parse_kldstat(_raw(ev, filtered)) if ev.step(filtered) else [])
    holder = file_containing(shown, f"nexus/{name}") if shown else None
    if holder is None and registered:
        holder = next((f for f in shown if f.name == f"{name}.ko"), None)
    desc = dev.get(f"dev.{name}.0.%desc")
    boot_msg = _last_message(dmesg, name)
    if desc is not None:
        info.attached = True
        info.algorithms = [a for a in desc.split(",") if a]
    elif ev.step(StepName.SYSCTL_DEV) is not None and registered is not None:
        info.attached = False
    elif boot_msg is not None:
        info.attached = boot_msg.attached
        info.algorithms = list(boot_msg.algorithms)
    if info.attached:
        info.accelerates_aes = any(a.startswith("AES") for a in info.algorithms) if info.algorithms else None
    elif info.attached is False:
        info.accelerates_aes = False

    if registered:
        if holder is not None and holder.name != "kernel" and holder.id != 1:
            info.state = "loaded"
            info.compiled_in = False
            info.module_file = holder.path or ko
        elif holder is None and not any(f.modules for f in kld) and ev.step(kldstat_m_step(name)) is not None:
            # registered (kldstat -m) but kldstat -v was not collected: in the kernel or a module; a
            # GENERIC kernel's config tells which
            stock = in_generic(name, os) if stock_kernel(os) else None
            if stock is None:
                info.state = "unknown"
                info.reason = f"{name} is registered, but without kldstat -v it cannot tell compiled in from loaded"
            else:
                info.state = "builtin" if stock else "loaded"
                info.compiled_in = stock
        else:
            info.state = "builtin"
            info.compiled_in = True
        if info.attached is False and info.state != "unknown":
            info.state = "no-device"
    elif registered is False:
        exists = ev.exists(ko)
        found = module_files(ev)
        elsewhere = next((f for f in found or () if f.endswith(f"/{name}.ko") and f != ko), None)
        if exists or elsewhere:
            info.state = "not-loaded"
            info.module_file = ko if exists else elsewhere
        elif exists is False and found is not None:
            info.state = "missing"  # not in /boot/kernel nor in any kern.module_path directory
        else:
            info.state = "unknown"
            info.reason = (
                f"{name} is not loaded, and whether {name}.ko is on disk was not checked"
                if exists is not False else f"{name}.ko is not in /boot/kernel; kern.module_path's other "
                "directories (/boot/modules) were not checked"
            )
        info.attached = False
        info.accelerates_aes = False
        info.compiled_in = False
    elif boot_msg is not None:
        _from_boot_message(info, boot_msg, os)
    else:
        info.reason = _no_kldstat(ev, kld)
    if boot_msg is not None:
        info.at_boot = True
    elif dmesg.root_mounted and stock_kernel(os) and in_generic(name, os) is False:
        info.at_boot = False  # a complete boot of a GENERIC without the driver, and no line of it
    info.in_generic = in_generic(name, os, info.compiled_in, appliance_possible(ev, os))
    return info


def appliance_possible(ev: Evidence, os: OSInfo) -> bool:
    """The files that name an appliance were not all collected and the kernel is not a stock one."""
    return (
        os.variant in ("freebsd", "hardenedbsd") and any(k not in ev.steps for k in PRODUCT_STEPS)
        and not stock_kernel(os)
    )


def _no_kldstat(ev: Evidence, kld: list[KldFile]) -> str:
    what = "pasted" if ev.origin == "paste" else "collected"
    if kld and not any(f.modules for f in kld):
        # plain `kldstat`: the files loaded, not the modules compiled into the kernel
        return f"the {what} kldstat is without -v: it lists the files loaded, not what the kernel has compiled in"
    return f"kldstat -v was not {what}"


def _from_boot_message(info: DriverInfo, msg: DriverMessage, os: OSInfo) -> None:
    """Without kldstat: what the driver's boot message in dmesg.boot shows, on a kernel whose config is
    known (GENERIC of a release that does or does not compile the driver in). Else the state stays unknown."""
    compiled = in_generic(info.name or "", os) if stock_kernel(os) else None
    if compiled is None:
        info.state = "unknown"
        kernel = (
            f"a {os.kernel_ident} kernel of a release not shown" if stock_kernel(os) and os.release is None
            else f"a kernel whose config ({os.kernel_ident or 'not shown'}) bsdcrypt does not know"
        )
        info.reason = (
            f"kldstat -v is missing, and dmesg's {info.name}0 line cannot tell compiled in from loaded on {kernel}"
        )
        return
    info.compiled_in = compiled
    if compiled:
        info.state = "builtin" if msg.attached else "no-device"
    else:
        # GENERIC of this release lacks the driver: the message came from the module (aesni.ko),
        # preloaded by the loader (before the root mount) or kldloaded later; a module stays loaded
        # whether or not its device attached
        info.state = "loaded" if msg.attached else "no-device"


def preloaded(dmesg: DmesgBoot, driver: DriverInfo) -> bool:
    """The loader loaded the driver's module at the last boot: a GENERIC kernel without the driver
    printed its attach (or probe) message before mounting root."""
    if driver.compiled_in is not False or driver.state not in ("loaded", "no-device") or driver.name is None:
        return False
    msg = _last_message(dmesg, driver.name)
    return msg is not None and msg.before_root is True


def _last_message(dmesg: DmesgBoot, driver: str) -> DriverMessage | None:
    found = [m for m in dmesg.drivers if m.driver == driver]
    return found[-1] if found else None


APPLIANCE_SETTING = "appliance setting"
APPLIANCE_INFERRED = "appliance setting (inferred)"
# The steps that tell an appliance from plain FreeBSD (parse_product's inputs for pfSense/OPNsense).
PRODUCT_STEPS = (
    file_step(File.PLATFORM), file_step(File.VERSION), StepName.OPNSENSE_VERSION, file_step(File.PFSENSE_RELEASE)
)
_CRYPTO_TAG = re.compile(r"<crypto_hardware>([^<]*)</crypto_hardware>|<crypto_hardware\s*/>")


def appliance_crypto(ev: Evidence) -> str | None:
    """pfSense/OPNsense config.xml's <crypto_hardware> value ("" for None), or None if unreadable."""
    st = ev.step(StepName.APPLIANCE_CRYPTO)
    if st is None or st.rc not in (0, 1):
        return None  # not collected, not readable without root (2), or no config.xml (3)
    m = _CRYPTO_TAG.search(st.text)
    return (m.group(1) or "").strip() if m else ""


def loader_files_complete(ev: Evidence, major: int | None) -> str | None:
    """None when every loader configuration file the loader reads was collected, else what is missing.

    The probe frames each file it tried (rc 1 when absent); the loader.conf.d files come from a loop
    that runs before the module file checks, so those checks show it ran. A paste shows only what was
    pasted."""
    missing = [p for p in (File.LOADER_CONF, File.LOADER_CONF_LOCAL) if ev.step(file_step(p)) is None]
    if (major is None or major >= 13) and not any(k.startswith(EXISTS_PREFIX) for k in ev.steps):
        missing.append("/boot/loader.conf.d")
    return ", ".join(missing) or None


UNCOLLECTED = "which the probe did not collect"  # in PersistInfo.uncertain: enable reads those files itself


def _uncollected(ev: Evidence, outs: list[Outcome]) -> list[str]:
    """What the loader may read that the probe did not collect (a file loader_conf_files names, a
    directory loader_conf_dirs names). /boot/device.hints, which older probes did not read, is taken
    to hold device hints only."""
    paths, dirs = needed(outs)
    out = [p for p in sorted(paths) if ev.step(file_step(p)) is None and p != DEVICE_HINTS]
    out += [d for d in sorted(dirs) if d.rstrip("/") != LOADER_CONF_DIR and ev.step(dir_step(d.rstrip("/"))) is None]
    return out


def _uncertainty(ev: Evidence, outs: list[Outcome], name: str) -> str | None:
    missing = _uncollected(ev, outs)
    if missing:
        return f"the loader also reads {', '.join(missing[:3])}, {UNCOLLECTED}"
    unmodelled = [u for o in outs for u in o.unmodelled]
    if unmodelled:
        return unmodelled[0]
    if agree(outs, lambda o: o.loads) is None:
        by_gen = {g: [o for o in outs if o.generation == g] for g in sorted({o.generation for o in outs})}
        if len(by_gen) > 1 and all(agree(group, lambda o: o.loads) is not None for group in by_gen.values()):
            yes = [GENERATION_NAMES[g] for g, group in by_gen.items() if group[0].loads]
            return (
                f"only {' and '.join(yes) or 'no generation'} loads it: the lua loaders before and since 14.1 read "
                f"loader.conf.local and loader.conf.d in a different order, and {name} differs between them"
            )
        return (
            f"{name} differs between loader.conf.d files, which the loader reads in directory order (not by "
            "name): which one wins depends on the file system"
        )
    return None


def _persist_info(ev: Evidence, driver: DriverInfo, cpu: CPUInfo, os: OSInfo, dmesg: DmesgBoot) -> PersistInfo:
    if driver.name is None:
        # no AES driver for this architecture: nothing to persist; architecture unknown: unknown
        return PersistInfo(configured=False, needed=False) if os.arch else PersistInfo()
    variant = os.variant
    name = f"{driver.name}_load"
    files = files_from_evidence(ev)
    outs = outcomes(files, driver.name, os.major)
    assignment = outs[0].load  # the likeliest generation, loader.conf.d by name
    value = assignment.value if assignment else None
    yes = is_yes(assignment)
    info = PersistInfo(value=value)
    read = {p for o in outs for p in o.order}
    unread = [a for a in all_assignments([f for f in files if f[0] not in read], name) if "/loader.conf.d/" in a.path]
    if unread:
        info.ignored = f"{unread[-1].path}:{unread[-1].line}"
    if assignment is not None:
        info.source = f"{assignment.path}:{assignment.line}"
    hit = next((o.blacklist for o in outs if o.blacklist is not None), None)
    if hit is not None and not driver.compiled_in:
        info.blacklisted = f"{hit.path}:{hit.line}"
    usable: bool | None = cpu.aesni is not False and driver.state in ("loaded", "not-loaded", "no-device")
    if usable and cpu.aesni is None and driver.attached is not True or driver.state == "unknown":
        usable = None  # whether the CPU could use the driver, or the driver is there, is not known
    incomplete = loader_files_complete(ev, os.major)
    product_unknown = any(k not in ev.steps for k in PRODUCT_STEPS) and not stock_kernel(os)
    loads = agree(outs, lambda o: o.loads)
    if driver.compiled_in:
        info.configured = True
        info.needed = False
        info.source = info.source if yes else "kernel"
    elif variant in GUI_LOADED and not yes:
        # pfSense/OPNsense load the module from their own crypto setting at boot (config.xml), not from
        # a loader.conf line; read it where the probe could, else infer it from the module being loaded.
        setting = appliance_crypto(ev)
        info.needed = usable
        if setting is not None:
            info.configured = driver.name in setting.split(",") or any(driver.name in v for v in setting.split(","))
            info.source = f"{APPLIANCE_SETTING} (config.xml crypto_hardware={setting or 'none'})"
        elif driver.state == "loaded":
            info.configured = None
            info.source = APPLIANCE_INFERRED
            info.reason = "the appliance's config.xml was not collected or not readable without root"
        else:
            info.configured = None
            info.reason = "the appliance's config.xml was not collected or not readable without root"
    elif incomplete is None and not product_unknown and (loads or driver.compiled_in is False):
        # every file the loader reads was collected (loadermodel: each loader generation, the
        # loader.conf.d orders it may use); where they disagree, `uncertain` says why
        info.uncertain = _uncertainty(ev, outs, name)
        info.configured = None if info.uncertain else loads
        info.needed = usable if driver.state != "unknown" else None
    elif preloaded(dmesg, driver):
        # the loader loaded the module at the last boot, so the configuration it read loads it
        info.configured = True
        info.needed = True
        info.source = info.source if yes else "loader (preloaded at boot: dmesg.boot)"
    else:
        info.configured = None  # the loader configuration (or the appliance's) was not collected in full
        info.needed = False if usable is False and driver.state != "unknown" else None
        what = "pasted" if ev.origin == "paste" else "collected"
        if incomplete is not None:
            info.reason = f"not {what}: {incomplete}"
        elif driver.compiled_in is None and not product_unknown:
            info.reason = f"whether {driver.name} is compiled into this kernel is not known"
        else:
            info.reason = "whether this is an appliance that loads it from its own setting was not " + what
    return info


# The names under which a driver lists the HMAC a GELI provider needs (aesni: SHA1/SHA256; ossl: SHA2-*-HMAC).
_HMAC_NEEDS = {
    "HMAC/SHA1": ("SHA1", "SHA1-HMAC"),
    "HMAC/SHA256": ("SHA256", "SHA2-256-HMAC"),
    "HMAC/SHA384": ("SHA2-384-HMAC",),
    "HMAC/SHA512": ("SHA2-512-HMAC",),
}


def _driver_algorithms(status: Status) -> list[set[str]] | None:
    """What each AES driver does (or would do once loaded, judging by the CPU flags)."""
    attached = [d for d in (status.driver, *status.other_drivers) if d.attached]
    if attached:
        return [set(d.algorithms) for d in attached]
    if status.cpu.aesni is None:
        return None
    if not status.cpu.aesni:
        return []
    algos = {"AES-CBC", "AES-XTS"}
    if status.driver.name == "aesni" and status.cpu.sha:
        algos |= {"SHA1", "SHA256"}
    return [algos]


def _accelerable(p: GeliProvider, drivers: list[set[str]] | None) -> bool | None:
    """GELI makes one OCF session for cipher and HMAC: one driver must do both, or all runs in software."""
    enc = (p.encryption or "").upper()
    if enc not in ("AES-XTS", "AES-CBC"):
        return False
    if drivers is None:
        return None
    need = _HMAC_NEEDS.get(p.authentication.upper(), ()) if p.authentication else None
    for algos in drivers:
        if enc in algos and (need is None or any(n in algos for n in need)):
            return True
    return False


def _geli_infos(providers: list[GeliProvider], status: Status) -> list[GeliInfo]:
    accel_now = bool(status.driver.attached and status.driver.accelerates_aes) or any(
        d.attached and d.accelerates_aes for d in status.other_drivers
    )
    algos = _driver_algorithms(status)
    out: list[GeliInfo] = []
    for p in providers:
        crypto = (p.crypto or "").lower() or None
        # g_eli_dumpconf prints hardware, software, accelerated software, or UNKNOWN (no driver chosen yet);
        # anything else cannot be judged either.
        known = crypto in ("hardware", "software", "accelerated software")
        accelerated = crypto in ("hardware", "accelerated software") if known else None
        accelerable = _accelerable(p, algos)
        out.append(
            GeliInfo(
                name=p.name,
                encryption=p.encryption,
                key_length=p.key_length,
                crypto=p.crypto,
                authentication=p.authentication,
                accelerated=accelerated,
                accelerable=accelerable,
                needs_reattach=bool(accelerated is False and accelerable and accel_now),
            )
        )
    return out


def _assess_linux(ev: Evidence, status: Status) -> None:
    osr = parse_os_release(_file_text(ev, File.OS_RELEASE) or "")
    flags = parse_cpuinfo_flags(_raw(ev, StepName.LINUX_CPU_FLAGS))
    words = (ev.text(StepName.UNAME_A) or "").split()
    status.os = OSInfo(
        name="Linux",
        variant=osr.get("ID", "linux"),
        product=osr.get("PRETTY_NAME"),
        release=words[2] if len(words) > 2 else None,
        arch=words[-2] if len(words) > 2 and words[-1] == "GNU/Linux" else (words[-1] if words else None),
    )
    aes = None if flags is None else ("aes" in flags)
    vm = None if flags is None else ("hypervisor" in flags)
    status.cpu = CPUInfo(
        model=parse_cpuinfo_model(_raw(ev, StepName.LINUX_CPU_FLAGS)),
        aesni=aes,
        sha=None if flags is None else ("sha_ni" in flags),
        vm=vm,
    )
    loaded = ev.step(StepName.LINUX_AESNI_INTEL)
    state = "unknown" if loaded is None else ("loaded" if loaded.ok else "not-loaded")
    status.driver = DriverInfo(name="aesni_intel", state=state)  # type: ignore[arg-type]
    status.userland_aes = userland.userland_info(ev, status.cpu, status.os.arch)
    aes_txt = {True: "yes", False: "no", None: "unknown"}[aes]
    status.findings.append(
        Finding(
            "not-freebsd",
            "unknown",
            f"Linux host (CPU AES: {aes_txt}, aesni_intel: {state}): bsdcrypt audits FreeBSD-family kernels.",
            "On Linux the kernel uses AES-NI through aesni_intel; check `lsmod | grep aesni` or `cat /proc/crypto`.",
        )
    )
    status.findings.extend(userland.findings(status))
