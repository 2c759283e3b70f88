"""Findings: what an experienced FreeBSD admin concludes from a Status.

Each finding has a stable id (documented in docs/findings.md), a severity,
a one-line message and a concrete remedy.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bsdcrypt.status import Finding, GeliInfo, Status

CHACHA = (
    "prefer ChaCha20-Poly1305 where the protocol allows (IPsec, TLS/KTLS, SSH, WireGuard); "
    "AES without AES-NI is several times slower"
)

# Where each appliance keeps the setting that loads the driver (its GUI writes loader.conf itself).
APPLIANCE_SETTING: dict[str, str] = {
    "pfsense": "pfSense GUI: System > Advanced > Miscellaneous > Cryptographic & Thermal Hardware, "
    "set Cryptographic Hardware to 'AES-NI CPU-based Acceleration' and Save",
    "opnsense": "OPNsense GUI: System > Settings > Miscellaneous > Cryptography settings, "
    "set Hardware acceleration to the AES-NI option and Save",
    "truenas": "TrueNAS UI: System > Tunables (Advanced), add Variable aesni_load, Value YES, Type loader; reboot",
    "freenas": "FreeNAS UI: System > Tunables, add Variable aesni_load, Value YES, Type loader; reboot",
}


VARIANT_NAMES = {
    "hardenedbsd": "HardenedBSD",
    "pfsense": "pfSense",
    "opnsense": "OPNsense",
    "truenas": "TrueNAS",
    "freenas": "FreeNAS",
    "ghostbsd": "GhostBSD",
    "midnightbsd": "MidnightBSD",
}

# Passthrough advice per hypervisor (kern.vm_guest names).
PASSTHROUGH: dict[str, str] = {
    "kvm": "KVM/QEMU: -cpu host (libvirt: <cpu mode='host-passthrough'/>; Proxmox: CPU type host)",
    "bhyve": "bhyve passes the host's AES-NI flag through unless its CPUID is masked: check the host's firmware "
    "setting and the guest's bhyve options",
    "hv": "Hyper-V: do not enable processor compatibility mode for the VM",
    "vmware": "VMware: remove any CPUID mask on the VM and check the EVC mode of the cluster",
    "xen": "Xen: remove cpuid= masks from the guest config (or use a newer CPU feature level)",
    "vbox": "VirtualBox: give the VM the host's CPU profile (VBoxManage modifyvm VM --cpu-profile host) and remove "
    "any --cpuid-remove/--cpuidset masks",
    "qemu": "QEMU: run with KVM and -cpu host (or a CPU model with +aes); libvirt: <cpu mode='host-passthrough'/>",
    "parallels": "Parallels: set the VM's CPU type to the host's (no CPU masking)",
}


# CPU brand strings (hw.model) of families in which every model has AES-NI, so a bare-metal host whose
# Features2 lacks AESNI has it switched off in the firmware. Deliberately narrow (docs/findings.md):
# Intel Core i5/i7 from the 2nd generation (Sandy Bridge: all desktop and mobile i5/i7), i9, i3 only from
# the 5th generation (Sandy/Ivy Bridge i3 have none, Haswell's i3-4000M neither), Core Ultra; Xeon E3-12xx,
# E5, E7 (v1 brand strings read "E31230", "E5-2670 0", "E7- 4870"), Xeon Scalable, D, E-2xxx, W; AMD Ryzen,
# Threadripper, EPYC, FX (Bulldozer and later) and Opteron 3200/3300/4200/4300/6200/6300 (Bulldozer,
# Piledriver). Not Pentium, Celeron, Atom or Athlon, whose models differ.
# Patterns as text: re compiles (and caches) one only when a CPU without AESNI is looked up.
_AES_FAMILIES: tuple[tuple[str, str], ...] = (
    ("Intel Core i5/i7/i9 (2nd generation or later)", r"Core\(TM\) i[579]-(?:[2-9]\d{3}|1\d{4})"),
    ("Intel Core i3 (5th generation or later)", r"Core\(TM\) i3-(?:[5-9]\d{3}|1\d{4})"),
    ("Intel Core Ultra", r"Core\(TM\) Ultra \d"),
    ("Intel Xeon E3/E5/E7", r"Xeon\(R\) CPU\s+(?:E3-?\s?12\d\d|E5-\s?\d{4}|E7-\s?\d{4})"),
    ("Intel Xeon Scalable/D/E/W", r"Xeon\(R\) (?:Bronze|Silver|Gold|Platinum|[DW]-\d{4}|E-2\d{3})"),
    ("AMD Ryzen/Threadripper/EPYC", r"AMD (?:Ryzen|EPYC)"),
    ("AMD FX", r"AMD FX\(tm\)-\d{4}"),
    ("AMD Opteron (Bulldozer or later)", r"Opteron\(tm\) Processor [346][23]\d\d\b"),
)


def aes_family(model: str | None) -> str | None:
    """The CPU family, if every CPU of it has AES-NI (see _AES_FAMILIES), else None."""
    if not model:
        return None
    return next((family for family, pattern in _AES_FAMILIES if re.search(pattern, model)), None)


def kernel_aes_users(status: Status) -> str:
    """The kernel's AES consumers on this release: KTLS arrived in 13.0, and ZFS native encryption with
    OpenZFS in base in 13.0 (TrueNAS 12 already shipped OpenZFS 2.0); GELI and IPsec exist throughout."""
    major = status.os.major
    modern = major is None or major >= 13
    users = ["GELI"]
    if modern or status.os.variant == "truenas":
        users.append("ZFS encryption")
    users.append("IPsec")
    if modern:
        users.append("KTLS")
    return ", ".join(users)


def persist_remedy(status: Status) -> str:
    driver = status.driver.name or "aesni"
    setting = APPLIANCE_SETTING.get(status.os.variant)
    if setting:
        return setting + " (do not edit the generated /boot/loader.conf by hand)"
    p = status.persist
    if p.blacklisted:
        return (
            f"remove {driver} from module_blacklist at {p.blacklisted} (the loader skips a blacklisted "
            f"module whatever {driver}_load says), then: bsdcrypt enable --persist"
        )
    if p.uncertain:
        return f"bsdcrypt enable --persist   (makes every {driver}_load the loader may read last \"YES\")"
    if p.value is not None and p.value.lower() != "yes" and p.source and p.source != "kernel":
        return (
            f"bsdcrypt enable --persist   (changes {driver}_load=\"{p.value}\" at {p.source} to \"YES\"; "
            "check first why it was turned off there)"
        )
    return f"bsdcrypt enable --persist   (adds {driver}_load=\"YES\" to /boot/loader.conf)"


def _aes_attached(s: Status) -> bool:
    """The primary driver is attached and does AES."""
    return bool(s.driver.attached and s.driver.accelerates_aes)


def _geli_soft(s: Status) -> list[GeliInfo]:
    """AES providers on software crypto that the driver could take over (cipher and HMAC both supported)."""
    return [g for g in s.geli if g.accelerated is False and g.accelerable]


def findings(s: Status) -> list[Finding]:
    """Every finding of a FreeBSD-family host: the first gate that holds ends it; else every rule, in order."""
    for gate in GATES:
        found = gate(s)
        if found is not None:
            return [found]
    return [f for rule in RULES for f in rule(s)]


def _probe_incomplete(s: Status) -> Finding | None:
    """Neither the release nor the architecture is shown: nothing else can be judged."""
    if s.os.release is not None or s.os.arch is not None:
        return None
    d = s.driver
    if s.source.startswith("paste:"):
        shown = [what for what, known in (
            (f"a {s.cpu.hypervisor} guest", s.cpu.hypervisor),
            (f"{d.name} {d.state}", d.name and d.state != "unknown"),
            ("GELI providers", s.geli),
        ) if known]
        message = (
            "The paste shows neither the release nor the architecture (no dmesg banner, no uname -a), so the "
            "rest cannot be judged" + (f"; it does show: {', '.join(shown)}." if shown else ".")
        )
        remedy = "Paste `uname -a` and /var/run/dmesg.boot as well."
    else:
        message = "The probe output lacks the release and architecture: the host could not be assessed."
        remedy = "Run `bsdcrypt record -o host.yaml` on the host and check the recording for failed steps."
    return Finding("probe-incomplete", "unknown", message, remedy)


def _arch_unknown(s: Status) -> Finding | None:
    """The release is shown, the machine is not: which driver applies is unknown."""
    if s.driver.name is not None or s.os.arch is not None:
        return None
    # the release is known but not the machine (a banner cut or run on): which driver applies is unknown
    return Finding(
        "arch-unknown",
        "unknown",
        f"The architecture of this {s.os.name or 'FreeBSD'} {s.os.release or ''} host is not shown (no "
        "readable MACHINE at the end of the dmesg banner, no uname -a, no sysctl hw.machine_arch): "
        "which AES driver applies, and whether one exists, is unknown.",
        "Paste `uname -a` (or run `bsdcrypt status` on the host).",
    )


def _arch_unsupported(s: Status) -> Finding | None:
    """An architecture without an AES driver: kernel AES runs in software."""
    if s.driver.name is not None:
        return None
    return Finding(
        "arch-unsupported",
        "info",
        f"FreeBSD has no AES acceleration driver for {s.os.arch}: kernel AES runs in software.",
        CHACHA[0].upper() + CHACHA[1:] + ".",
    )


def _driver_state(s: Status) -> list[Finding]:
    """What the driver's state means now: no AES in the CPU, not loaded, missing, not attached, unknown."""
    out: list[Finding] = []
    d, cpu = s.driver, s.cpu
    geli_soft = _geli_soft(s)
    sha_only = bool(d.attached and d.algorithms and not d.accelerates_aes)

    if cpu.aesni is False or sha_only:
        aes_soft = any(g.accelerated is False and _aes(g.encryption) for g in s.geli)
        out.append(_no_aes_finding(s, sha_only, aes_soft))
    elif d.state == "not-loaded":
        # with the CPU's AES unknown, the driver may have nothing to accelerate: unknown, not a warning
        severity = "critical" if geli_soft else ("warning" if cpu.aesni else "unknown")
        consumers = f"; GELI provider(s) {', '.join(g.name for g in geli_soft)} run in software" if geli_soft else ""
        off = s.persist.value is not None and s.persist.value.lower() != "yes"
        if off and s.persist.configured is False and s.persist.source:
            consumers += f"; {d.name}_load=\"{s.persist.value}\" at {s.persist.source} keeps it off at boot"
        if s.persist.configured:
            remedy = f"kldload {d.name}   (loader.conf already loads it at the next boot)"
        else:
            remedy = f"kldload {d.name} now; to keep it: " + persist_remedy(s)
        if s.os.variant in APPLIANCE_SETTING:
            remedy = APPLIANCE_SETTING[s.os.variant]
        if cpu.aesni is None:
            what = (
                f"kernel AES ({kernel_aes_users(s)}) may run in software: whether the CPU has AES instructions "
                f"is unknown (dmesg.boot shows no CPU flags){consumers}."
            )
            remedy = "Check the CPU first (`grep -w AESNI /var/run/dmesg.boot`, or `dmesg`); if it has AES-NI: " + (
                remedy
            )
        else:
            what = f"kernel AES ({kernel_aes_users(s)}) runs in software{consumers}."
        out.append(
            Finding(
                "driver-not-loaded",
                severity,  # type: ignore[arg-type]
                f"{d.name}.ko is on disk but not loaded: {what}",
                remedy,
            )
        )
    elif d.state == "missing":
        ident = s.os.kernel_ident or "this kernel"
        out.append(
            Finding(
                "driver-missing",
                "critical" if geli_soft else "warning",
                f"No {d.name} driver: it is not compiled into {ident} and {d.name}.ko is not in /boot/kernel.",
                f"Add `device crypto` and `device {d.name}` to the {ident} kernel config and rebuild, "
                f"or build the module: cd /usr/src/sys/modules/{d.name} && make && make install",
            )
        )
    elif d.state == "no-device":
        out.append(
            Finding(
                "driver-not-attached",
                "warning" if cpu.aesni else "unknown",
                f"{d.name} is in the kernel but no {d.name}0 device attached, although the CPU "
                + ("advertises AES." if cpu.aesni else "may support AES (no CPU flags in dmesg.boot)."),
                f"Check `dmesg | grep {d.name}` and that no hint.{d.name}.0.disabled is set in "
                "/boot/device.hints or loader.conf.",
            )
        )
    elif d.state == "unknown":
        out.append(
            Finding(
                "driver-unknown",
                "unknown",
                f"Could not tell whether {d.name} is in the kernel, loaded or on disk: "
                f"{d.reason or 'probe output incomplete'}.",
                "Run `kldstat -v` and `sysctl dev.aesni` on the host, or send a `bsdcrypt record` recording.",
            )
        )
        if d.at_boot is False and cpu.aesni:
            out.append(
                Finding(
                    "not-loaded-at-boot",
                    "warning",
                    f"At the last boot the loader did not load {d.name}.ko: dmesg.boot shows a complete boot of "
                    f"{s.os.kernel_ident} {s.os.release}, which does not compile {d.name} in, with no {d.name}0 line. "
                    f"Unless it was kldloaded since, kernel AES ({kernel_aes_users(s)}) runs in software.",
                    f"Check with `kldstat -v | grep {d.name}`; if it is not there: kldload {d.name}, and to keep it: "
                    + persist_remedy(s),
                )
            )

    return out


def _not_persisted(s: Status) -> list[Finding]:
    """Loaded now, but nothing loads it at boot."""
    out: list[Finding] = []
    d = s.driver
    aes_attached = _aes_attached(s)
    if aes_attached and d.state == "loaded" and s.persist.configured is False:
        out.append(
            Finding(
                "not-persisted",
                "warning",
                f"{d.name} is loaded now but nothing loads it at boot: after a reboot kernel AES runs in software.",
                persist_remedy(s),
            )
        )
    return out


def _appliance_managed(s: Status) -> list[Finding]:
    """An appliance loads it from its own setting."""
    out: list[Finding] = []
    d = s.driver
    aes_attached = _aes_attached(s)
    source = s.persist.source or ""
    if aes_attached and source.startswith("appliance setting") and s.persist.configured is not False:
        product = s.os.product or VARIANT_NAMES.get(s.os.variant, s.os.variant)
        if s.persist.configured and not s.persist.inferred:
            setting = source.split("(", 1)[-1].rstrip(")")
            what = f"{product}'s own crypto setting selects it ({setting}), so it loads at boot."
        else:
            what = (
                f"{product} loads crypto modules at boot from its own crypto setting, which the probe could not "
                "read (config.xml not collected, or not readable without root): persisted is inferred from the "
                "module being loaded, not seen."
            )
        out.append(
            Finding(
                "appliance-managed",
                "info",
                f"{d.name} is loaded; {what}",
                "Check it stays selected: " + APPLIANCE_SETTING[s.os.variant],
            )
        )
    return out


def _blacklisted_or_uncertain(s: Status) -> list[Finding]:
    """module_blacklist names the driver, or the loader's reading differs between its generations."""
    out: list[Finding] = []
    d = s.driver
    geli_soft = _geli_soft(s)
    if s.persist.blacklisted and not d.compiled_in:
        out.append(
            Finding(
                "driver-blacklisted",
                "critical" if geli_soft else "warning",
                f"module_blacklist at {s.persist.blacklisted} names {d.name}: the loader skips a blacklisted "
                f"module at boot, so {d.name}_load=\"YES\" has no effect (it can still be kldloaded by hand).",
                f"If it was not meant: remove {d.name} from module_blacklist at {s.persist.blacklisted}, then "
                "`bsdcrypt enable --persist` (bsdcrypt does not edit a blacklist).",
            )
        )
    elif s.persist.uncertain and s.persist.configured is None and not d.compiled_in:
        out.append(
            Finding(
                "persist-uncertain",
                "unknown",
                f"Whether the loader loads {d.name} at boot cannot be told: {s.persist.uncertain}.",
                persist_remedy(s),
            )
        )
    return out


def _persist_unknown(s: Status) -> list[Finding]:
    """Whether it is loaded at boot is unknown, and why."""
    out: list[Finding] = []
    d = s.driver
    p = s.persist
    if (
        p.configured is None and p.needed is not False and p.reason and s.os.variant not in APPLIANCE_SETTING
        and d.state not in ("unknown", "missing")
    ):
        out.append(
            Finding(
                "persist-unknown",
                "unknown",
                f"Whether {d.name} is loaded at boot is unknown: {p.reason}.",
                "Run the probe again (`bsdcrypt record -o host.yaml` on the host) and check that it finishes.",
            )
        )
    return out


def _conf_d_ignored(s: Status) -> list[Finding]:
    """A loader.conf.d line the loader of this release never reads."""
    out: list[Finding] = []
    d = s.driver
    if s.persist.ignored:
        out.append(
            Finding(
                "loader-conf-d-ignored",
                "warning",
                f"{d.name}_load at {s.persist.ignored} has no effect: the loader of FreeBSD {s.os.release} does not "
                "read /boot/loader.conf.d (13.0 and later do).",
                "Move the line to /boot/loader.conf (`bsdcrypt enable --persist` writes it there).",
            )
        )
    return out


def _persist_redundant(s: Status) -> list[Finding]:
    """A _load line for a compiled-in driver."""
    out: list[Finding] = []
    d = s.driver
    if d.compiled_in and s.persist.value is not None and s.persist.source not in (None, "kernel"):
        out.append(
            Finding(
                "persist-redundant",
                "info",
                f"{d.name} is compiled into the kernel; {d.name}_load in {s.persist.source} is not needed.",
                "Harmless; remove it if you like: sysrc -f "
                f"{s.persist.source.rsplit(':', 1)[0]} -x {d.name}_load",
            )
        )

    return out


def _geli_software(s: Status) -> list[Finding]:
    """GELI providers attached before the driver: software until re-attached."""
    out: list[Finding] = []
    d = s.driver
    aes_attached = _aes_attached(s)
    if aes_attached:
        why = (
            f"it was attached before {d.name} was available"
            if not d.compiled_in
            else f"{d.name} is compiled in, so it was attached while the driver was unusable"
        )
        for g in s.geli:
            if g.needs_reattach:
                out.append(
                    Finding(
                        "geli-software",
                        "critical",
                        f"GELI provider {g.name} ({g.encryption} {g.key_length}) uses software crypto: {why}.",
                        f"Re-attach it: geli detach {g.name} && geli attach <options> "
                        f"{g.name.removesuffix('.eli')} (root, swap or busy providers: reboot).",
                    )
                )
    return out


def _geli_providers(s: Status) -> list[Finding]:
    """GELI providers whose crypto path cannot be told, or whose HMAC no driver accelerates."""
    out: list[Finding] = []
    d = s.driver
    for g in s.geli:
        crypto = (g.crypto or "").strip()
        if crypto.lower() not in GELI_CRYPTO and (g.encryption is None or _aes(g.encryption)):
            if crypto.upper() == "UNKNOWN":
                why = (
                    "reports `Crypto: UNKNOWN`: GELI had not chosen an OCF driver for it yet (G_ELI_CRYPTO_UNKNOWN, "
                    "the state before its first crypto session)"
                )
            elif not crypto:
                why = "shows no `Crypto:` line in `geli list`"
            else:
                why = f"reports an unrecognized `Crypto: {crypto}`"
            out.append(
                Finding(
                    "geli-crypto-unknown",
                    "unknown",
                    f"GELI provider {g.name} {why}, so whether it uses AES acceleration cannot be told.",
                    f"Run `geli list {g.name}` again; if it still says so, detach and re-attach it (root or swap: "
                    "reboot) and check `dmesg | grep GEOM_ELI` for errors.",
                )
            )
        if g.accelerated is False and g.authentication and g.accelerable is False and _aes(g.encryption):
            out.append(
                Finding(
                    "geli-auth-unaccelerated",
                    "info",
                    f"GELI provider {g.name} verifies integrity with {g.authentication}, which {d.name} does not "
                    "accelerate here, so GELI runs cipher and HMAC in software.",
                    "Nothing to re-attach. Providers created with `geli init -a HMAC/SHA256` on a CPU with SHA "
                    "extensions can be accelerated; without -a, AES-XTS alone is.",
                )
            )
    return out


# A gate ends the assessment with its one finding; the rules then each add theirs (the order is the
# report's order within a severity: status.by_severity sorts stably).
GATES: tuple[Callable[[Status], Finding | None], ...] = (_probe_incomplete, _arch_unknown, _arch_unsupported)
RULES: tuple[Callable[[Status], list[Finding]], ...] = (
    _driver_state,
    _not_persisted,
    _appliance_managed,
    _blacklisted_or_uncertain,
    _persist_unknown,
    _conf_d_ignored,
    _persist_redundant,
    _geli_software,
    _geli_providers,
)


# The Crypto values g_eli_dumpconf prints for a provider with a chosen driver (sys/geom/eli/g_eli.c);
# its default branch prints UNKNOWN.
GELI_CRYPTO = frozenset({"hardware", "software", "accelerated software"})


def _aes(encryption: str | None) -> bool:
    return (encryption or "").upper().startswith("AES")


def _no_aes_finding(s: Status, sha_only: bool, geli_soft: bool) -> Finding:
    cpu = s.cpu
    model = cpu.model or "this CPU"
    if sha_only:
        return Finding(
            "aes-disabled-in-firmware",
            "warning",
            f"{s.driver.name}0 attached for SHA1/SHA256 only: {model} reports no AES-NI, which on a CPU that "
            "has SHA extensions usually means AES-NI is disabled in the firmware.",
            "Enable AES-NI in the BIOS/UEFI setup and reboot; meanwhile " + CHACHA + ".",
        )
    if cpu.vm:
        hv = cpu.hypervisor or "hypervisor"
        return Finding(
            "vm-hides-aesni",
            "warning",
            f"This {hv} guest's virtual CPU does not advertise AES-NI, so no driver can accelerate AES here.",
            "Ask the VM's provider for CPU passthrough of AES-NI ("
            + PASSTHROUGH.get(hv, "CPU passthrough / host CPU model")
            + "); meanwhile "
            + CHACHA
            + ".",
        )
    family = aes_family(cpu.model)
    if family is not None and cpu.vm is False:
        d = s.driver
        then = ""
        if d.state == "not-loaded":
            then = f"; then kldload {d.name}"
            if not s.persist.configured:
                then += " and persist it: " + persist_remedy(s)
        return Finding(
            "aes-disabled-in-firmware",
            "warning",
            f"AES-NI is probably disabled in the firmware (BIOS/UEFI setup): {model} ({family}) has AES-NI, "
            "but the CPU does not advertise it (no AESNI in Features2), so kernel AES runs in software.",
            "Enable AES-NI in the BIOS/UEFI setup (CPU or advanced processor settings) and reboot; check with "
            "`grep AESNI /var/run/dmesg.boot`" + then + "; meanwhile " + CHACHA + ".",
        )
    return Finding(
        "cpu-no-aesni",
        "warning" if geli_soft else "info",
        f"{model} has no AES instructions: there is nothing to load, kernel AES runs in software"
        + (" (GELI included)." if geli_soft else "."),
        CHACHA[0].upper() + CHACHA[1:] + "; for fast disk encryption, newer hardware.",
    )
