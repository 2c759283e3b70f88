"""The parse stage: a host's evidence (the probe's steps, or a paste) -> its facts, once.

gather (probe) -> parse (here) -> assess (assess/). Every source the FreeBSD assessment reads is parsed
here and nowhere else. A source that was not shown is None (or absent from `shown`): a paste marks what it
did not include as not shown, so the assessment never asks where the text came from; it only words its
messages by `seen` ("pasted" or "collected").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bsdcrypt.facts import DmesgBoot, GeliProvider, KldFile, Product
from bsdcrypt.loader.conf import files_from_evidence
from bsdcrypt.parsers.configxml import crypto_hardware
from bsdcrypt.parsers.dmesg import parse_dmesg
from bsdcrypt.parsers.geli import parse_geli_list
from bsdcrypt.parsers.kenv import parse_kenv, smbios_hypervisor
from bsdcrypt.parsers.kldstat import parse_kldstat
from bsdcrypt.parsers.linux import parse_cpuinfo_flags, parse_cpuinfo_model
from bsdcrypt.parsers.osrelease import parse_os_release, parse_product
from bsdcrypt.parsers.sysctl import parse_sysctl
from bsdcrypt.parsers.version import parse_freebsd_version, parse_uname_a
from bsdcrypt.platform import AES_DRIVERS, KERNEL_DRIVERS
from bsdcrypt.probe import FILE_PREFIX, Evidence, File, StepName, kldstat_m_step


@dataclass(frozen=True)
class LinuxFacts:
    """A Linux host's few facts (bsdcrypt audits FreeBSD-family kernels and says little of Linux)."""

    os_release: dict[str, str]  # /etc/os-release
    cpu_flags: frozenset[str] | None  # /proc/cpuinfo flags
    cpu_model: str | None
    uname_words: list[str]  # uname -a, split
    aesni_intel: bool | None  # the aesni_intel module is loaded (None: not checked)


@dataclass(frozen=True)
class HostFacts:
    """What the evidence shows, parsed. None: not shown (not pasted, not collected, or not readable)."""

    evidence: Evidence  # the subjects that parse their own sources (userland, consumers) still read it
    pasted: bool  # read from a paste: what it lacks was not shown, not absent from the host
    shown: frozenset[str]  # the step names the evidence holds
    os_name: str | None  # uname -s, kern.ostype or dmesg's banner; None when a paste names no system
    root: bool | None  # the probe ran as root
    sysctl: dict[str, str]
    dev: dict[str, str] | None  # sysctl dev.aesni dev.armv8crypto ... (None: not shown)
    dmesg: DmesgBoot  # the last boot of dmesg.boot (a filtered paste: only what its lines show)
    uname: dict[str, str]  # uname -a's fields
    os_release: dict[str, str]  # /var/run/os-release
    product: Product | None  # pfSense, OPNsense, GhostBSD, TrueNAS...
    userland_version: str | None  # freebsd-version -u
    kernel_installed: str | None  # freebsd-version -k
    kld: list[KldFile] | None  # kldstat -v (or plain kldstat, pasted)
    kld_filtered: list[KldFile] | None  # `kldstat | grep ...` pasted: a line it lacks means nothing
    registered: dict[str, bool | None]  # kldstat -m DRIVER: found (rc 0), not found (rc 1), None: not run
    smbios_hypervisor: str | None  # a hypervisor named by kenv's SMBIOS strings
    kenv_shown: bool
    module_files: list[str] | None  # the crypto .ko files on kern.module_path
    geli: list[GeliProvider] | None  # geli list (None: not pasted; dmesg.boot then tells the boot's)
    loader_files: list[tuple[str, bytes]]  # the loader configuration files, in the probe's order
    appliance_crypto: str | None  # config.xml's <crypto_hardware> ("" none), None: not readable
    linux: LinuxFacts | None  # only for a Linux host

    @property
    def seen(self) -> str:
        """How the text reached bsdcrypt, for messages: "pasted" or "collected"."""
        return "pasted" if self.pasted else "collected"

    def exists(self, path: str) -> bool | None:
        return self.evidence.exists(path)


def _text(ev: Evidence, name: str) -> str:
    """Output of a step whatever its exit status (sysctl exits 1 if any OID is unknown)."""
    st = ev.step(name)
    return st.text if st is not None else ""


def _file(ev: Evidence, path: str) -> str | None:
    data = ev.file(path)
    return data.decode("utf-8", errors="replace") if data is not None else None


def _dmesg(ev: Evidence) -> DmesgBoot:
    text = _file(ev, File.DMESG_BOOT)
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


def _registered(ev: Evidence, name: str) -> bool | None:
    st = ev.step(kldstat_m_step(name))
    return st.rc == 0 if st is not None and st.rc in (0, 1) else None


def _module_files(ev: Evidence) -> list[str] | None:
    st = ev.step(StepName.MODULE_FILES)
    if st is None or st.rc != 0:
        return None
    return [line.strip() for line in st.text.splitlines() if line.strip().endswith(".ko")]


def _appliance_crypto(ev: Evidence) -> str | None:
    st = ev.step(StepName.APPLIANCE_CRYPTO)
    if st is None or st.rc not in (0, 1):
        return None  # not collected, not readable without root (2), or no config.xml (3)
    return crypto_hardware(st.text)


def _linux(ev: Evidence) -> LinuxFacts:
    flags = parse_cpuinfo_flags(_text(ev, StepName.LINUX_CPU_FLAGS))
    loaded = ev.step(StepName.LINUX_AESNI_INTEL)
    return LinuxFacts(
        os_release=parse_os_release(_file(ev, File.OS_RELEASE) or ""),
        cpu_flags=None if flags is None else frozenset(flags),
        cpu_model=parse_cpuinfo_model(_text(ev, StepName.LINUX_CPU_FLAGS)),
        uname_words=(ev.text(StepName.UNAME_A) or "").split(),
        aesni_intel=None if loaded is None else loaded.ok,
    )


def parse(ev: Evidence) -> HostFacts:
    """Parse every source the assessment reads, once."""
    pasted = ev.origin == "paste"
    sysctl = parse_sysctl(_text(ev, StepName.SYSCTL))
    dmesg = _dmesg(ev)
    os_name = (ev.text(StepName.UNAME_S) or "").strip() or sysctl.get("kern.ostype") or dmesg.os_name
    id_u = ev.text(StepName.ID_U)
    kld_shown = ev.step(StepName.KLDSTAT_V) is not None
    filtered_shown = ev.step(StepName.KLDSTAT_FILTERED) is not None
    geli_shown = ev.step(StepName.GELI_LIST) is not None or not pasted
    return HostFacts(
        evidence=ev,
        pasted=pasted,
        # a file step the probe refused to read (status 2: a device, a FIFO, over 1 MiB) is not shown
        shown=frozenset(k for k, st in ev.steps.items() if not (k.startswith(FILE_PREFIX) and st.rc == 2)),
        # a paste of kldstat or geli list alone names no system (FreeBSD-family tools): not shown
        os_name=os_name or (None if pasted else ""),
        root=None if id_u is None else id_u.strip() == "0",
        sysctl=sysctl,
        dev=parse_sysctl(_text(ev, StepName.SYSCTL_DEV)) if ev.step(StepName.SYSCTL_DEV) is not None else None,
        dmesg=dmesg,
        uname=parse_uname_a(ev.text(StepName.UNAME_A) or ""),
        os_release=parse_os_release(_file(ev, File.RUN_OS_RELEASE) or ""),
        product=parse_product(
            _file(ev, File.PLATFORM),
            _file(ev, File.VERSION),
            ev.text(StepName.OPNSENSE_VERSION),
            ev.text(StepName.GHOSTBSD_VERSION),
            _file(ev, File.PFSENSE_RELEASE),
        ),
        userland_version=parse_freebsd_version(ev.text(StepName.FREEBSD_VERSION_U) or ""),
        kernel_installed=parse_freebsd_version(ev.text(StepName.FREEBSD_VERSION_K) or ""),
        kld=parse_kldstat(_text(ev, StepName.KLDSTAT_V)) if kld_shown else None,
        kld_filtered=parse_kldstat(_text(ev, StepName.KLDSTAT_FILTERED)) if filtered_shown else None,
        registered={name: _registered(ev, name) for name in (*KERNEL_DRIVERS, *AES_DRIVERS)},
        smbios_hypervisor=smbios_hypervisor(parse_kenv(_text(ev, StepName.KENV_SMBIOS))),
        kenv_shown=ev.step(StepName.KENV_SMBIOS) is not None,
        module_files=_module_files(ev),
        geli=parse_geli_list(_text(ev, StepName.GELI_LIST)) if geli_shown else None,
        loader_files=files_from_evidence(ev),
        appliance_crypto=_appliance_crypto(ev),
        linux=_linux(ev) if os_name == "Linux" else None,
    )
