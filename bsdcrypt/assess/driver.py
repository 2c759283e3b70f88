"""The AES drivers (aesni, armv8crypto, ossl, ...): compiled in, loaded, not loaded, no device, missing."""

from __future__ import annotations

from bsdcrypt.assess.ossl import ossl_algorithms
from bsdcrypt.facts import DmesgBoot, DriverMessage, KldFile
from bsdcrypt.parse import HostFacts
from bsdcrypt.parsers.kldstat import file_containing
from bsdcrypt.platform import (
    AES_DRIVERS,
    APPLIANCES,
    KERNEL_DRIVERS,
    primary_driver,
)
from bsdcrypt.probe import File, StepName, file_step, kldstat_m_step
from bsdcrypt.status import CPUInfo, DriverInfo, OSInfo

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


def driver_infos(f: HostFacts, os: OSInfo, cpu: CPUInfo) -> list[DriverInfo]:
    kld, dmesg = f.kld or [], f.dmesg
    primary = primary_driver(os.arch)
    if primary is None and os.arch is None:
        # architecture not shown (a kldstat paste): aesni.ko exists only on x86, armv8crypto on arm64
        primary = next((d for d in AES_DRIVERS if _registered(f, d, kld) or last_message(dmesg, d)), None)
    infos: list[DriverInfo] = []
    for name in KERNEL_DRIVERS:
        info = _driver_info(name, f, kld, os)
        if info.attached is None and info.state in ("builtin", "loaded") and _cannot_attach(name, cpu):
            # aesni_probe needs AESNI or SHA, armv8_crypto_probe needs AES: this CPU has neither
            info.attached, info.accelerates_aes, info.state = False, False, "no-device"
        if name == "ossl" and info.attached:
            info.algorithms, info.accelerates_aes = ossl_algorithms(os, cpu, dmesg.cpu)  # assess/ossl.py
        if name == primary:
            infos.insert(0, info)
        elif info.attached:  # other drivers only when they do something (padlock on Intel never attaches)
            infos.append(info)
    if primary is None:
        # an architecture without an AES driver, or one that was not shown
        infos.insert(0, DriverInfo(name=None, state="missing" if os.arch else "unknown"))
    return infos


def _registered(f: HostFacts, name: str, kld: list[KldFile], os: OSInfo | None = None) -> bool | None:
    if f.registered.get(name) is not None:
        return f.registered[name]
    if not kld and f.kld_filtered is not None:
        # `kldstat | grep ...` pasted: a line it shows is real, a line it lacks means nothing
        shown = f.kld_filtered
        seen = file_containing(shown, f"nexus/{name}") is not None or any(k.name == f"{name}.ko" for k in shown)
        return True if seen else None
    if kld and any(k.modules for k in kld):
        return file_containing(kld, f"nexus/{name}") is not None
    if kld and any(k.name == f"{name}.ko" for k in kld):
        return True  # plain kldstat (no -v) lists the module file
    if kld and os is not None and stock_kernel(os) and in_generic(name, os) is False:
        # Inferred: plain kldstat lists every file loaded, and this release's GENERIC (12.x and older for
        # aesni) does not compile the driver in, so the only way it could be there is its .ko: not listed,
        # not loaded. (Issue 27: a 12.x GENERIC paste whose GELI says `Crypto: software` agrees.)
        return False
    return None  # plain kldstat without it: compiled in or not loaded, it cannot tell


def _cannot_attach(name: str, cpu: CPUInfo) -> bool:
    if name == "aesni":
        return cpu.aesni is False and cpu.sha is False
    if name == "armv8crypto":
        return cpu.aesni is False
    return False


def stock_kernel(os: OSInfo) -> bool:
    """The release's own GENERIC (or HardenedBSD's HARDENEDBSD) kernel, by its config name."""
    return (os.kernel_ident or "").upper().startswith(STOCK_IDENTS)


def _driver_info(name: str, f: HostFacts, kld: list[KldFile], os: OSInfo) -> DriverInfo:
    ko = f"/boot/kernel/{name}.ko"
    info = DriverInfo(name=name)
    dev, dmesg = f.dev or {}, f.dmesg
    registered = _registered(f, name, kld, os)
    # a filtered kldstat paste shows the file holding the module, when it shows it at all
    shown = kld or f.kld_filtered or []
    holder = file_containing(shown, f"nexus/{name}") if shown else None
    if holder is None and registered:
        holder = next((k for k in shown if k.name == f"{name}.ko"), None)
    desc = dev.get(f"dev.{name}.0.%desc")
    boot_msg = last_message(dmesg, name)
    if desc is not None:
        info.attached = True
        info.algorithms = [a for a in desc.split(",") if a]
    elif f.dev is not None and registered is not None:
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
        elif holder is None and not any(k.modules for k in kld) and kldstat_m_step(name) in f.shown:
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
        exists = f.exists(ko)
        found = f.module_files
        elsewhere = next((m for m in found or () if m.endswith(f"/{name}.ko") and m != ko), None)
        if exists or elsewhere:
            info.state = "not-loaded"
            info.module_file = ko if exists else elsewhere
        elif exists is False and found is not None:
            info.state = "missing"  # not in /boot/kernel nor in any kern.module_path directory
        elif exists is None and found is None and stock_kernel(os) and in_generic(name, os) is False:
            # Inferred: a release's GENERIC without the driver ships it as /boot/kernel/NAME.ko (built with
            # the kernel's modules); the files were not checked (a paste), but every stock install has it
            info.state = "not-loaded"
            info.module_file = ko
            info.inferred = (f"{name} is not in plain kldstat, and {os.kernel_ident} {os.release} does not compile "
                             f"it in: not loaded; {ko} ships with that kernel")
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
        info.reason = _no_kldstat(f, kld)
    if boot_msg is not None:
        info.at_boot = True
    elif dmesg.root_mounted and stock_kernel(os) and in_generic(name, os) is False:
        info.at_boot = False  # a complete boot of a GENERIC without the driver, and no line of it
    info.in_generic = in_generic(name, os, info.compiled_in, appliance_possible(f, os))
    return info


def appliance_possible(f: HostFacts, os: OSInfo) -> bool:
    """The files that name an appliance were not all collected and the kernel is not a stock one."""
    return (
        os.variant in ("freebsd", "hardenedbsd") and any(k not in f.shown for k in PRODUCT_STEPS)
        and not stock_kernel(os)
    )


def _no_kldstat(f: HostFacts, kld: list[KldFile]) -> str:
    what = f.seen
    if kld and not any(k.modules for k in kld):
        # plain `kldstat`: the files loaded, not the modules compiled into the kernel
        return f"the {what} kldstat is without -v: it lists the files loaded, not what the kernel has compiled in"
    return f"kldstat -v was not {what}"


def _from_boot_message(info: DriverInfo, msg: DriverMessage, os: OSInfo) -> None:
    """Without kldstat: what the driver's boot message in dmesg.boot shows, on a kernel whose config is
    known (GENERIC of a release that does or does not compile the driver in). Else the state stays unknown."""
    compiled = in_generic(info.name or "", os) if stock_kernel(os) else None
    if compiled is None and not msg.attached and msg.message:
        # Inferred: the driver printed why it did not attach (`armv8crypto0: CPU lacks AES instructions`,
        # `aesni0: No AES or SHA support.`): its probe ran, so it is in the kernel (compiled in or loaded)
        # and found nothing to drive. Either way the answer is the same: no device.
        info.state = "no-device"
        info.attached, info.accelerates_aes = False, False
        info.inferred = (f"{info.name}0 said \"{msg.message}\": the driver ran (compiled in or loaded) "
                         "and attached nothing")
        return
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
    msg = last_message(dmesg, driver.name)
    return msg is not None and msg.before_root is True


def last_message(dmesg: DmesgBoot, driver: str) -> DriverMessage | None:
    found = [m for m in dmesg.drivers if m.driver == driver]
    return found[-1] if found else None


# The steps that tell an appliance from plain FreeBSD (parse_product's inputs for pfSense/OPNsense).
PRODUCT_STEPS = (
    file_step(File.PLATFORM), file_step(File.VERSION), StepName.OPNSENSE_VERSION, file_step(File.PFSENSE_RELEASE)
)

