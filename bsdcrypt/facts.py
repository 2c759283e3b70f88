"""What the parsers return: plain data, no behaviour.

Every field that the source did not show is None ("unknown"), never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KldFile:
    """One file line of `kldstat -v` and the modules it contains."""

    id: int
    refs: int
    address: str
    size: int | None
    name: str  # e.g. "kernel", "aesni.ko"
    path: str | None  # e.g. "/boot/kernel/aesni.ko" (only with -v)
    modules: tuple[str, ...] = ()  # e.g. ("nexus/aesni", "aesni")


@dataclass(frozen=True)
class CpuFeatures:
    """CPU identification from the last boot in dmesg.boot."""

    model: str | None = None  # the CPU: line brand string
    features2: frozenset[str] | None = None  # names inside Features2=0x..<...>
    stdext: frozenset[str] | None = None  # Structured Extended Features=<...>
    hypervisor: str | None = None  # Hypervisor: Origin = "..." (raw, stripped)
    isa0: frozenset[str] | None = None  # arm64 Instruction Set Attributes 0 = <...>
    stdext2: frozenset[str] | None = None  # Structured Extended Features2=<...> (VAES, VPCLMULQDQ)
    # x86: a `Features=` line was printed but no `Features2=` line followed before the CPU block
    # ended. identcpu.c prints Features2 only when CPUID.1:ECX is non-zero, so the CPU has no AESNI.
    no_features2: bool = False
    # x86: the CPU block ended (real/avail memory after `Features=`): a line it lacks was not printed
    block_complete: bool = False


@dataclass(frozen=True)
class DriverMessage:
    """The boot message of a crypto driver unit, e.g. `aesni0: <AES-CBC,...> on motherboard`."""

    driver: str  # "aesni", "armv8crypto", "ossl", "padlock"
    attached: bool  # True when a <description> was printed
    algorithms: tuple[str, ...] = ()  # split of the <...> description
    message: str = ""  # e.g. "No AES or SHA support." when it did not attach
    # printed before "Trying to mount root from" (during kernel start-up: compiled in or preloaded
    # by the loader), after it (kldloaded at run time), or None when the boot shows no root mount
    before_root: bool | None = None


@dataclass(frozen=True)
class DmesgBoot:
    banner: str | None = None  # "FreeBSD 13.0-RELEASE-p4 #0: ..." of the last boot
    os_name: str | None = None  # first word of the banner: FreeBSD, MidnightBSD, ...
    boots: int = 0  # how many boots the buffer held (the last one is used)
    cpu: CpuFeatures = field(default_factory=CpuFeatures)
    drivers: tuple[DriverMessage, ...] = ()
    hardenedbsd: bool = False  # "HardenedBSD: initialize and check features" seen
    arch: str | None = None  # MACHINE, the banner's last word: amd64, i386, arm64, ...
    kernel_ident: str | None = None  # the kernel config name from the banner (GENERIC), if not redacted
    geli: tuple[GeliProvider, ...] = ()  # GELI providers attached during boot (GEOM_ELI lines)
    vm_hint: str | None = None  # hypervisor named by ACPI/SMBIOS/driver strings (kern.vm_guest names)
    vm_hint_text: str | None = None  # the line that named it
    root_mounted: bool = False  # banner, then "Trying to mount root from": the boot's device probe is complete


@dataclass(frozen=True)
class GeliProvider:
    name: str  # geom name, e.g. "ada0p4.eli"
    state: str | None = None
    encryption: str | None = None  # "AES-XTS"
    key_length: int | None = None
    crypto: str | None = None  # "hardware" | "software" | "accelerated software" | "UNKNOWN"
    authentication: str | None = None
    flags: tuple[str, ...] = ()
    version: int | None = None
    consumer: str | None = None  # e.g. "ada0p4"


@dataclass(frozen=True)
class Assignment:
    """One `name=value` line of a loader configuration file."""

    path: str
    line: int  # 1-based
    name: str
    value: str  # unquoted value


@dataclass(frozen=True)
class Release:
    """A FreeBSD-style release string such as `13.0-RELEASE-p4` or `12.1-RELEASE-p8-HBSD`."""

    raw: str  # the string as parsed, stripped
    major: int
    minor: int
    branch: str  # "RELEASE", "STABLE", "CURRENT", "BETA2", "RC1", "PRERELEASE", ... ("" for "2.2.6")
    patch: int | None  # the -pN patch level, None when absent
    hbsd: bool  # "-HBSD" suffix (HardenedBSD, OPNsense before 22.1)


@dataclass(frozen=True)
class Product:
    """An appliance or distribution built on FreeBSD, from its own version files."""

    name: str  # "pfSense", "OPNsense", "TrueNAS", "FreeNAS", "GhostBSD", "MidnightBSD", ...
    version: str | None  # e.g. "2.6.0-RELEASE", "24.1.2", "13.0-U6", "25.02-R14.3p8"
    variant: str  # lower-case key: "pfsense", "opnsense", "truenas", "freenas", "ghostbsd", "midnightbsd"


@dataclass(frozen=True)
class ZfsDataset:
    """A ZFS dataset's encryption as `zfs get` shows it (issue 27: kernel crypto consumers)."""

    name: str
    encryption: str | None = None  # "off", "aes-256-gcm", ...; None: the line was not shown
    keystatus: str | None = None  # "available", "unavailable" ("-" for unencrypted reads None)


@dataclass(frozen=True)
class IpsecSA:
    """One security association of `setkey -D` (lib/libipsec/pfkey_dump.c pfkey_sadump)."""

    satype: str  # esp, ah, ipcomp, esp-udp
    mode: str | None = None  # transport, tunnel, any
    encryption: str | None = None  # the E: name (aes-gcm-16, aes-cbc, rijndael-cbc, null) or a bare number
    authentication: str | None = None  # the A: name (hmac-sha2-256, hmac-sha1, ...)
    state: str | None = None  # larval, mature, dying, dead


@dataclass(frozen=True)
class SetkeyDump:
    """What `setkey -D` showed: the SAs, or why it could not read them."""

    readable: bool | None = None  # True: SAs or "No SAD entries." shown; False: pfkey_open failed
    sas: tuple[IpsecSA, ...] = ()
    error: str | None = None  # pfkey_open's error text, e.g. "Operation not permitted"


@dataclass(frozen=True)
class KtlsState:
    """`sysctl kern.ipc.tls` (sys/kern/uipc_ktls.c, sys/opencrypto/ktls_ocf.c)."""

    present: bool | None = None  # the kernel has KTLS (options KERN_TLS); None: not shown
    enabled: bool | None = None  # kern.ipc.tls.enable
    sessions: dict[str, dict[str, int]] = field(default_factory=dict)  # "sw"/"ifnet"/"toe" -> cbc/gcm/chacha20
    ocf: dict[str, int] = field(default_factory=dict)  # kern.ipc.tls.stats.ocf.* counters
    active: int | None = None  # kern.ipc.tls.stats.active
