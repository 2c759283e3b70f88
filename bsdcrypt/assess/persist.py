"""Whether the driver comes back at the next boot: loader configuration, appliance settings, preloads."""

from __future__ import annotations

from bsdcrypt.assess.driver import PRODUCT_STEPS, preloaded, stock_kernel
from bsdcrypt.facts import DmesgBoot
from bsdcrypt.loader.conf import all_assignments, is_yes, uncollected
from bsdcrypt.loader.model import GENERATION_NAMES, Outcome, agree, outcomes
from bsdcrypt.parse import HostFacts
from bsdcrypt.platform import GUI_LOADED
from bsdcrypt.probe import EXISTS_PREFIX, File, file_step
from bsdcrypt.status import CPUInfo, DriverInfo, OSInfo, PersistInfo

APPLIANCE_SETTING = "appliance setting"
APPLIANCE_INFERRED = "appliance setting (inferred)"


def loader_files_complete(f: HostFacts, major: int | None) -> str | None:
    """None when every loader configuration file the loader reads was collected, else what is missing.

    The probe frames each file it tried (rc 1 when absent); the loader.conf.d files come from a loop
    that runs before the module file checks, so those checks show it ran. A paste shows only what was
    pasted."""
    missing = [_not_read(f, p) for p in (File.LOADER_CONF, File.LOADER_CONF_LOCAL) if file_step(p) not in f.shown]
    if (major is None or major >= 13) and not any(k.startswith(EXISTS_PREFIX) for k in f.shown):
        missing.append("/boot/loader.conf.d")
    return ", ".join(missing) or None


def _not_read(f: HostFacts, path: str) -> str:
    """`path`, and why the probe did not read it when it said so (status 2: a device, FIFO, over 1 MiB)."""
    st = f.evidence.steps.get(file_step(path))
    said = st.text.strip().splitlines() if st is not None and st.rc == 2 else []
    return f"{path} (not read: {said[-1][:120]})" if said else path


UNCOLLECTED = "which the probe did not collect"  # in PersistInfo.uncertain: enable reads those files itself


def _uncollected(f: HostFacts, outs: list[Outcome]) -> list[str]:
    """What the loader may read that the probe did not collect (loader.conf.uncollected: the one answer
    enable's flow asks too)."""
    return uncollected(f.evidence, outs)


def _uncertainty(f: HostFacts, outs: list[Outcome], name: str) -> str | None:
    missing = _uncollected(f, outs)
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


def persist_info(f: HostFacts, driver: DriverInfo, cpu: CPUInfo, os: OSInfo) -> PersistInfo:
    if driver.name is None:
        # no AES driver for this architecture: nothing to persist; architecture unknown: unknown
        return PersistInfo(configured=False, needed=False) if os.arch else PersistInfo()
    variant = os.variant
    name = f"{driver.name}_load"
    files = f.loader_files
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
    incomplete = loader_files_complete(f, os.major)
    product_unknown = any(k not in f.shown for k in PRODUCT_STEPS) and not stock_kernel(os)
    loads = agree(outs, lambda o: o.loads)
    if driver.compiled_in:
        info.configured = True
        info.needed = False
        info.source = info.source if yes else "kernel"
    elif variant in GUI_LOADED and not yes:
        # pfSense/OPNsense load the module from their own crypto setting at boot (config.xml), not from
        # a loader.conf line; read it where the probe could, else infer it from the module being loaded.
        setting = f.appliance_crypto
        info.needed = usable
        if setting is not None:
            info.configured = driver.name in setting.split(",") or any(driver.name in v for v in setting.split(","))
            info.source = f"{APPLIANCE_SETTING} (config.xml crypto_hardware={setting or 'none'})"
        elif driver.state == "loaded":
            # Inferred: the module is loaded and no loader.conf line loads it; pfSense/OPNsense load crypto
            # modules at boot from their own setting, so the setting selects it (config.xml not readable)
            info.configured = True
            info.source = APPLIANCE_INFERRED
            info.inferred = (f"{driver.name} is loaded and no loader.conf line loads it: the appliance's crypto "
                             "setting does (its config.xml was not collected or not readable without root)")
        else:
            info.configured = None
            info.reason = "the appliance's config.xml was not collected or not readable without root"
    elif incomplete is None and not product_unknown and (loads or driver.compiled_in is False):
        # every file the loader reads was collected (loadermodel: each loader generation, the
        # loader.conf.d orders it may use); where they disagree, `uncertain` says why
        info.uncertain = _uncertainty(f, outs, name)
        info.configured = None if info.uncertain else loads
        info.needed = usable if driver.state != "unknown" else None
    elif preloaded(f.dmesg, driver):
        # the loader loaded the module at the last boot, so the configuration it read loads it
        info.configured = True
        info.needed = True
        info.source = info.source if yes else "loader (preloaded at boot: dmesg.boot)"
    elif at_boot_autoconf(f.dmesg, driver):
        # Inferred: the driver printed its line during the last boot's autoconfiguration (before the root
        # mount), so it was compiled in or preloaded by the loader: either way it is there at every boot
        info.configured = True
        info.source = info.source if yes else "boot (dmesg.boot)"
        info.inferred = (f"{driver.name}0 is in dmesg.boot's autoconfiguration (before the root mount): compiled in "
                         "or preloaded, so there at every boot")
    else:
        info.configured = None  # the loader configuration (or the appliance's) was not collected in full
        info.needed = False if usable is False and driver.state != "unknown" else None
        what = f.seen
        if incomplete is not None:
            info.reason = f"not {what}: {incomplete}"
        elif driver.compiled_in is None and not product_unknown:
            info.reason = f"whether {driver.name} is compiled into this kernel is not known"
        else:
            info.reason = "whether this is an appliance that loads it from its own setting was not " + what
    return info



def at_boot_autoconf(dmesg: DmesgBoot, driver: DriverInfo) -> bool:
    """The driver's line in the last boot precedes the root mount (whether compiled in or not is unknown)."""
    if driver.name is None or driver.compiled_in is not None:
        return False
    found = [m for m in dmesg.drivers if m.driver == driver.name]
    return bool(found) and found[-1].before_root is True
