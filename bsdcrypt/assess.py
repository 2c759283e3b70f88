"""Pure assessment: evidence from the probe -> Status with findings.

Nothing here runs commands or knows which kind of host the evidence came from.
The reasoning behind every finding is in docs/findings.md.
"""

from __future__ import annotations

from bsdcrypt import advice
from bsdcrypt.facts import DmesgBoot, DriverMessage, GeliProvider, KldFile
from bsdcrypt.loaderconf import LOADER_CONF_DIR, all_assignments, files_from_evidence, is_yes
from bsdcrypt.loadermodel import DEVICE_HINTS, GENERATION_NAMES, Outcome, agree, needed, outcomes
from bsdcrypt.parsers.dmesg import parse_dmesg
from bsdcrypt.parsers.geli import parse_geli_list
from bsdcrypt.parsers.kldstat import file_containing, parse_kldstat
from bsdcrypt.parsers.linux import parse_cpuinfo_flags, parse_cpuinfo_model
from bsdcrypt.parsers.osrelease import parse_os_release, parse_product
from bsdcrypt.parsers.sysctl import parse_sysctl
from bsdcrypt.parsers.version import parse_freebsd_version, parse_release, parse_uname_a
from bsdcrypt.platform import AES_DRIVERS, APPLIANCES, ARM64, FREEBSD_FAMILY, GUI_LOADED, KERNEL_DRIVERS, primary_driver
from bsdcrypt.probe import Evidence
from bsdcrypt.status import CPUInfo, DriverInfo, Finding, GeliInfo, OSInfo, PersistInfo, Status
from bsdcrypt.userland import assess as userland

# Steps without which the driver, persistence or GELI conclusions cannot be trusted.
DECISIVE_STEPS = (
    "sysctl",
    "sysctl_dev",
    "kldstat_v",
    "kldstat_m:aesni",
    "file:/var/run/dmesg.boot",
    "file:/boot/loader.conf",
    "geli_list",
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
    sysctl = parse_sysctl(_raw(ev, "sysctl"))
    dmesg = parse_dmesg(_file_text(ev, "/var/run/dmesg.boot") or "")
    uname_s = (ev.text("uname_s") or "").strip() or sysctl.get("kern.ostype") or dmesg.os_name
    status.root = None if ev.text("id_u") is None else (ev.text("id_u") or "").strip() == "0"

    if uname_s == "Linux":
        _assess_linux(ev, status)
        return status
    if uname_s not in FREEBSD_FAMILY:
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
    status.cpu = _cpu_info(ev, sysctl, dmesg, status.os.arch)
    drivers = _driver_infos(ev, sysctl, dmesg, status.os, status.cpu)
    status.driver = drivers[0]
    status.other_drivers = drivers[1:]
    status.persist = _persist_info(ev, status.driver, status.cpu, status.os)
    status.geli = _geli_infos(parse_geli_list(_raw(ev, "geli_list")), status)
    status.userland_aes = userland.userland_info(ev, status.cpu, status.os.arch)
    status.findings = advice.findings(status) + userland.findings(status)
    missing = [name for name in DECISIVE_STEPS if name not in ev.steps]
    if missing:
        status.findings.append(
            Finding(
                "probe-partial",
                "unknown",
                f"The probe output lacks {', '.join(missing)} (cut off?): the conclusions above may be incomplete.",
                "Run the probe again (`bsdcrypt record -o host.yaml` on the host) and check that it finishes.",
            )
        )
    return status


def _os_info(ev: Evidence, sysctl: dict[str, str], dmesg: DmesgBoot, uname_s: str | None) -> OSInfo:
    osr = parse_os_release(_file_text(ev, "/var/run/os-release") or "")
    product = parse_product(
        _file_text(ev, "/etc/platform"),
        _file_text(ev, "/etc/version"),
        ev.text("opnsense_version"),
        ev.text("ghostbsd_version"),
        _file_text(ev, "/etc/pfsense-release"),
    )
    release_text = sysctl.get("kern.osrelease") or ""
    release = parse_release(release_text) if release_text else None
    if release is None and dmesg.banner:
        parts = dmesg.banner.split()
        release = parse_release(parts[1]) if len(parts) > 1 else None
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
        userland=parse_freebsd_version(ev.text("freebsd_version_u") or "") or osr.get("VERSION"),
        kernel_installed=parse_freebsd_version(ev.text("freebsd_version_k") or ""),
        osreldate=_int(sysctl.get("kern.osreldate")),
        arch=sysctl.get("hw.machine_arch") or _uname_arch(ev),
        kernel_ident=sysctl.get("kern.ident"),
    )
    if product and not info.product:
        info.product = product.name
    return info


def _uname_arch(ev: Evidence) -> str | None:
    return parse_uname_a(ev.text("uname_a") or "").get("machine")


def _cpu_info(ev: Evidence, sysctl: dict[str, str], dmesg: DmesgBoot, arch: str | None) -> CPUInfo:
    cpu = dmesg.cpu
    aes: bool | None = None
    sha: bool | None = None
    if arch in ARM64:
        if cpu.isa0 is not None:
            aes = "AES" in cpu.isa0 or any(f.startswith("AES") for f in cpu.isa0)
            sha = any(f.startswith("SHA") for f in cpu.isa0)
    else:
        if cpu.features2 is not None:
            aes = "AESNI" in cpu.features2
        if cpu.stdext is not None:
            sha = "SHA" in cpu.stdext
        elif cpu.features2 is not None:
            sha = False  # identcpu.c prints no Structured Extended Features line when there are none
    # An attached driver is proof of what the CPU offers, whatever dmesg kept.
    for msg in dmesg.drivers:
        if msg.driver in ("aesni", "armv8crypto") and msg.attached:
            aes = any(a.startswith("AES") for a in msg.algorithms) if aes is None else aes
            sha = any(a.startswith("SHA") for a in msg.algorithms) if sha is None else sha
    desc = sysctl.get("dev.aesni.0.%desc") or _sysctl_dev(ev).get("dev.aesni.0.%desc")
    if desc:
        aes = aes or "AES-" in desc
        sha = sha or "SHA" in desc
    vm_guest = sysctl.get("kern.vm_guest")
    hv_vendor = sysctl.get("hw.hv_vendor") or cpu.hypervisor
    in_vm: bool | None = None
    if vm_guest is not None:
        in_vm = vm_guest != "none"
    if cpu.features2 is not None and "HV" in cpu.features2 or cpu.hypervisor:
        in_vm = True
    elif in_vm is None and cpu.features2 is not None:
        in_vm = False
    hypervisor = None
    if in_vm:
        vendor = (hv_vendor or "").strip()
        hypervisor = (
            (vm_guest if vm_guest not in (None, "none", "generic") else None)
            or HV_VENDORS.get(vendor)
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
    return parse_sysctl(_raw(ev, "sysctl_dev"))


# Appliances build their own kernel config (platform.APPLIANCES): their stock kernel is that one, not
# GENERIC or HARDENEDBSD.
STOCK_IDENTS = ("GENERIC", "HARDENEDBSD")


def in_generic(driver: str, os: OSInfo, compiled_in: bool | None = None) -> bool | None:
    """Does this release's stock kernel compile the driver in?

    The stock kernel is GENERIC (aesni and armv8crypto from 13.0), HardenedBSD's HARDENEDBSD (aesni since
    10), or an appliance's own kernel, whose config bsdcrypt does not know: there the running kernel is the
    evidence (`compiled_in`: nexus/aesni under `kernel` in kldstat -v, or not: loaded from aesni.ko or not
    registered). OPNsense 20.7/21.1 run HardenedBSD 12.1 with their own SMP kernel, which loads aesni.ko.
    """
    if os.major is None:
        return None
    ident = (os.kernel_ident or "").upper()
    if os.variant in APPLIANCES and not ident.startswith(STOCK_IDENTS):
        if compiled_in is not None:
            return compiled_in
        if os.base == "hardenedbsd":
            return None  # HARDENEDBSD's config says nothing about the appliance's kernel
    if driver == "aesni" and os.base == "hardenedbsd":
        return os.major >= 10
    if driver in AES_DRIVERS:
        return os.major >= 13
    return False


def _driver_infos(
    ev: Evidence, sysctl: dict[str, str], dmesg: DmesgBoot, os: OSInfo, cpu: CPUInfo
) -> list[DriverInfo]:
    kld = parse_kldstat(_raw(ev, "kldstat_v")) if ev.step("kldstat_v") is not None else []
    dev = _sysctl_dev(ev)
    primary = primary_driver(os.arch)
    infos: list[DriverInfo] = []
    for name in KERNEL_DRIVERS:
        info = _driver_info(name, ev, kld, dev, dmesg, os)
        if name == "ossl" and info.attached:
            info.algorithms, info.accelerates_aes = ossl_algorithms(os, cpu, dmesg)
        if name == primary:
            infos.insert(0, info)
        elif info.attached:  # other drivers only when they do something (padlock on Intel never attaches)
            infos.append(info)
    if primary is None:
        infos.insert(0, DriverInfo(name=None, state="missing"))
    return infos


# What ossl(4) does (sys/crypto/openssl/ossl.c, ossl_probesession/ossl_lookup_cipher). Its device
# description is just "OpenSSL crypto", so the algorithms come from the source of the release:
#   13.0 (@ed0f7721, Mar 2021): SHA1/SHA2 digests and HMACs, Poly1305, ChaCha20, ChaCha20-Poly1305;
#   main from Sept 2021 (ossl.4 @197ff4c3, 14.0): AES-CBC when ossl_cpuid() finds AES (x86: the AESNI
#   CPUID bit; arm64: HWCAP_AES); 14.0 amd64: AES-GCM when the CPU has AVX+PCLMULQDQ+MOVBE or
#   VAES+VPCLMULQDQ (ossl_x86.c; FreeBSD-EN-23:17.ossl fixed it in 14.0). Never AES-XTS, GELI's default.
# Whether stable/13 (13.1+) got AES-CBC is not verified, nor when 14-CURRENT did: accelerates_aes is None.
# (Checked: freebsd-src's ossl.c @ed0f7721 has no cipher but ChaCha20; a later tree @298b6a0e has
# ossl_lookup_cipher's CRYPTO_AES_CBC case and ossl_aes.c, but nothing in it tells main from stable/13;
# no releng/13.x or stable/13 copy of sys/crypto/openssl was reachable. See docs/notes.md, issue 15.)
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
    st = ev.step(f"kldstat_m:{name}")
    if st is not None and st.rc in (0, 1):
        return st.rc == 0
    if kld:
        return file_containing(kld, f"nexus/{name}") is not None
    return None


def _driver_info(
    name: str, ev: Evidence, kld: list[KldFile], dev: dict[str, str], dmesg: DmesgBoot, os: OSInfo
) -> DriverInfo:
    ko = f"/boot/kernel/{name}.ko"
    info = DriverInfo(name=name)
    registered = _registered(ev, name, kld)
    holder = file_containing(kld, f"nexus/{name}") if kld else None
    if holder is None and registered:
        holder = next((f for f in kld if f.name == f"{name}.ko"), None)
    desc = dev.get(f"dev.{name}.0.%desc")
    boot_msg = _last_message(dmesg, name)
    if desc is not None:
        info.attached = True
        info.algorithms = [a for a in desc.split(",") if a]
    elif ev.step("sysctl_dev") is not None and registered is not None:
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
        else:
            info.state = "builtin"
            info.compiled_in = True
        if info.attached is False:
            info.state = "no-device"
    elif registered is False:
        exists = ev.exists(ko)
        info.state = "not-loaded" if exists else ("missing" if exists is False else "unknown")
        info.module_file = ko if exists else None
        info.attached = False
        info.accelerates_aes = False
        info.compiled_in = False
    elif boot_msg is not None:
        info.state = "unknown"
    info.in_generic = in_generic(name, os, info.compiled_in)
    return info


def _last_message(dmesg: DmesgBoot, driver: str) -> DriverMessage | None:
    found = [m for m in dmesg.drivers if m.driver == driver]
    return found[-1] if found else None


UNCOLLECTED = "which the probe did not collect"  # in PersistInfo.uncertain: enable reads those files itself


def _uncollected(ev: Evidence, outs: list[Outcome]) -> list[str]:
    """What the loader may read that the probe did not collect (a file loader_conf_files names, a
    directory loader_conf_dirs names). /boot/device.hints, which older probes did not read, is taken
    to hold device hints only."""
    paths, dirs = needed(outs)
    out = [p for p in sorted(paths) if ev.step("file:" + p) is None and p != DEVICE_HINTS]
    out += [d for d in sorted(dirs) if d.rstrip("/") != LOADER_CONF_DIR and ev.step("dir:" + d.rstrip("/")) is None]
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


def _persist_info(ev: Evidence, driver: DriverInfo, cpu: CPUInfo, os: OSInfo) -> PersistInfo:
    if driver.name is None:
        return PersistInfo(configured=False, needed=False)
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
    if driver.compiled_in:
        info.configured = True
        info.needed = False
        info.source = info.source if yes else "kernel"
    elif variant in GUI_LOADED and driver.state == "loaded" and not yes:
        # pfSense/OPNsense load the module from their own crypto setting at boot, not via loader.conf.
        info.configured = None
        info.needed = True
        info.source = "appliance setting"
    elif ev.step("file:/boot/loader.conf") is None:
        info.configured = None  # the probe did not get to the loader configuration
        info.needed = None
    else:
        info.uncertain = _uncertainty(ev, outs, name)
        info.configured = None if info.uncertain else agree(outs, lambda o: o.loads)
        usable = cpu.aesni is not False and driver.state in ("loaded", "not-loaded", "no-device")
        info.needed = usable if driver.state != "unknown" else None
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
    osr = parse_os_release(_file_text(ev, "/etc/os-release") or "")
    flags = parse_cpuinfo_flags(_raw(ev, "linux_cpu_flags"))
    words = (ev.text("uname_a") or "").split()
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
        model=parse_cpuinfo_model(_raw(ev, "linux_cpu_flags")),
        aesni=aes,
        sha=None if flags is None else ("sha_ni" in flags),
        vm=vm,
    )
    loaded = ev.step("linux_aesni_intel")
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
