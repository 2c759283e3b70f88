"""The assessed status of one host: the stable schema behind every report.

`Status.to_dict()` is the JSON/YAML schema documented in docs/output.md.
Bump SCHEMA_VERSION on any incompatible change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

SCHEMA_VERSION = 1

Severity = Literal["info", "warning", "critical", "unknown"]
Verdict = Literal["ok", "warning", "critical", "unknown"]
DriverState = Literal["builtin", "loaded", "not-loaded", "no-device", "missing", "unknown"]

EXIT_CODES: dict[str, int] = {"ok": 0, "warning": 1, "critical": 2, "unknown": 3}
# Which verdict wins when several apply (a host's findings, a fleet's hosts): critical before unknown,
# so one unreachable host never hides a critical one from cron or CI (the exit codes stay 0/1/2/3).
SEVERITY_RANK: dict[str, int] = {"info": 0, "ok": 0, "warning": 1, "unknown": 2, "critical": 3}
_BYSEVERITY_RANK: tuple[Verdict, ...] = ("ok", "warning", "unknown", "critical")


@dataclass
class OSInfo:
    name: str | None = None  # kernel family: FreeBSD, MidnightBSD, Linux
    variant: str = "unknown"  # freebsd, hardenedbsd, pfsense, opnsense, truenas, freenas, ghostbsd, ...
    base: str | None = None  # freebsd or hardenedbsd for appliances
    product: str | None = None  # e.g. "pfSense 2.6.0-RELEASE", "OPNsense 21.1.5"
    release: str | None = None  # running kernel, e.g. "13.0-RELEASE-p4"
    major: int | None = None
    minor: int | None = None
    branch: str | None = None  # RELEASE, STABLE, CURRENT, ...
    patch: int | None = None
    userland: str | None = None  # freebsd-version -u
    kernel_installed: str | None = None  # freebsd-version -k
    osreldate: int | None = None
    arch: str | None = None  # hw.machine_arch
    kernel_ident: str | None = None  # GENERIC, HARDENEDBSD, custom


@dataclass
class CPUInfo:
    model: str | None = None
    aesni: bool | None = None  # AES instructions usable by the kernel (AESNI in Features2 / AES on arm64)
    sha: bool | None = None
    vm: bool | None = None
    hypervisor: str | None = None  # kern.vm_guest or the CPUID origin


@dataclass
class DriverInfo:
    name: str | None = None  # aesni, armv8crypto (or aesni_intel on Linux)
    state: DriverState = "unknown"
    attached: bool | None = None
    algorithms: list[str] = field(default_factory=list)
    accelerates_aes: bool | None = None
    compiled_in: bool | None = None  # part of the running kernel (kldstat -v lists it under "kernel")
    module_file: str | None = None  # the .ko it was (or can be) loaded from
    in_generic: bool | None = None  # this release's GENERIC kernel compiles it in
    reason: str | None = None  # why state (or attached) is unknown: the evidence that was missing
    # dmesg.boot: True if the driver printed its attach/probe line during the last boot, False if a
    # complete boot on a kernel without it compiled in shows none (the loader did not load it)
    at_boot: bool | None = None
    inferred: str | None = None  # state reasoned, not seen: the reasoning (issue 27, docs/findings.md)


@dataclass
class PersistInfo:
    configured: bool | None = None  # compiled in, or an effective <driver>_load="YES"
    needed: bool | None = None  # whether a loader.conf line is needed at all
    source: str | None = None  # "kernel", or "/boot/loader.conf:12"
    value: str | None = None  # the effective <driver>_load value, if any
    ignored: str | None = None  # FILE:LINE of a <driver>_load this release's loader does not read
    reason: str | None = None  # why configured is unknown: the evidence that was missing
    blacklisted: str | None = None  # FILE:LINE of a module_blacklist naming the driver (the loader skips it)
    uncertain: str | None = None  # why whether the loader loads it at boot cannot be told
    inferred: str | None = None  # configured reasoned, not seen: the reasoning (issue 27, docs/findings.md)


@dataclass
class GeliInfo:
    name: str
    encryption: str | None
    key_length: int | None
    crypto: str | None
    accelerated: bool | None
    needs_reattach: bool
    authentication: str | None = None  # HMAC/SHA256 etc. when the provider has integrity verification
    accelerable: bool | None = None  # the host's AES driver can do this provider's algorithms (cipher and HMAC)


@dataclass
class CryptoLibInfo:
    """One `openssl` program the probe found and the libcrypto it runs with."""

    path: str  # /usr/bin/openssl (base / distribution), /usr/local/bin/openssl (ports)
    library: str | None = None  # OpenSSL, LibreSSL
    version: str | None = None  # 3.0.19, 1.1.1k-freebsd
    honours_ia32cap: bool | None = None  # False for LibreSSL
    grammar: str | None = None  # sscanf, two-word, five-word (docs/userland.md)
    vector: str | None = None  # the detected OPENSSL_ia32cap words (3.x only), 0x..:0x..
    aesni: bool | None = None  # bit 57 of that vector: OpenSSL sees AES-NI
    pclmulqdq: bool | None = None  # bit 33


@dataclass
class ServiceLinkInfo:
    """A service binary and the libcrypto it links (ldd)."""

    binary: str  # /usr/local/bin/tor
    libcrypto: str | None = None  # /lib/libcrypto.so.111; None: links none (or NSS)
    openssl: str | None = None  # the openssl program of that library (its version, vector, trials)


@dataclass
class OverrideInfo:
    """An OPENSSL_ia32cap found in a configuration file."""

    file: str
    line: int
    value: str | None  # the value, when the line is a plain assignment bsdcrypt can read
    scope: str  # service (rc.conf <svc>_env, a systemd drop-in, /etc/default/tor) or global
    service: str | None  # tor, tor@default, ...
    hazard: str  # ok, stale, plus, no-0x, replaces-w1, mask, unreadable
    message: str


@dataclass
class UserlandInfo:
    """Userland AES-NI (OpenSSL), separate from the kernel's: docs/userland.md."""

    # aesni-visible, hidden-by-hypervisor (a VM's CPU lacks the flag), cpu-without-aesni (bare metal:
    # never force), not-x86; None: unknown (the probe did not look, or no CPU flags)
    case: str | None = None
    libraries: list[CryptoLibInfo] | None = None  # None: the probe did not look (older recordings)
    services: list[ServiceLinkInfo] | None = None
    overrides: list[OverrideInfo] | None = None


# What the host's kernel crypto drivers do for one consumer's cipher now (docs/output.md, consumers):
# accelerated (a driver attached for it, or the NIC for KTLS ifnet sessions), software (no driver takes
# it here), not-affected (no AES: ChaCha20-Poly1305, NULL; WireGuard), not-in-use, unknown.
ConsumerVerdict = Literal["accelerated", "software", "not-affected", "not-in-use", "unknown"]


@dataclass
class ConsumerItem:
    """One thing a consumer encrypts with: a dataset, a group of SAs, a kind of KTLS session, a tunnel."""

    name: str  # "zroot/enc", "4 ESP SAs", "software sessions", "ovpn0", "ada0p2.eli"
    algorithm: str | None  # as the host names it: aes-256-gcm, aes-gcm-16 + hmac-sha2-256, AES-XTS 256
    cipher: str | None  # the OCF algorithm: AES-GCM, AES-CCM, AES-CBC, AES-ICM, AES-XTS, ChaCha20-Poly1305
    verdict: ConsumerVerdict
    by: str | None = None  # the driver that accelerates it (aesni, ossl, armv8crypto), "nic" for ifnet KTLS
    state: str | None = None  # ZFS keystatus, SA state, KTLS session count
    why: str | None = None  # one line: why this verdict


@dataclass
class ConsumerInfo:
    """A kernel crypto consumer: GELI, ZFS native encryption, IPsec, kernel TLS, OpenVPN DCO, WireGuard."""

    kind: str  # geli, zfs, ipsec, ktls, ovpn-dco, wireguard
    present: bool | None  # in use or configured on the host; None: not told by the evidence
    verdict: ConsumerVerdict  # of the items in use now (software before unknown before accelerated)
    detail: str  # one line a person reads
    reason: str | None = None  # why present/verdict is unknown, and the command that settles it
    items: list[ConsumerItem] = field(default_factory=list)


@dataclass
class Finding:
    id: str
    severity: Severity
    message: str
    remedy: str


@dataclass
class Status:
    host: str
    source: str
    os: OSInfo = field(default_factory=OSInfo)
    cpu: CPUInfo = field(default_factory=CPUInfo)
    driver: DriverInfo = field(default_factory=DriverInfo)
    other_drivers: list[DriverInfo] = field(default_factory=list)
    persist: PersistInfo = field(default_factory=PersistInfo)
    geli: list[GeliInfo] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    root: bool | None = None  # the probe ran as root
    userland_aes: UserlandInfo = field(default_factory=UserlandInfo)
    consumers: list[ConsumerInfo] = field(default_factory=list)  # kernel crypto consumers (issue 27)

    @property
    def verdict(self) -> Verdict:
        return _BYSEVERITY_RANK[max((SEVERITY_RANK[f.severity] for f in self.findings), default=0)]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = self.verdict
        return {"schema": SCHEMA_VERSION, **data}


def by_severity(findings: list[Finding]) -> list[Finding]:
    """Findings most severe first, as every report lists them: critical, unknown, warning, info (the
    verdict's ranking); findings of one severity keep their order (a stable sort)."""
    return sorted(findings, key=lambda f: -SEVERITY_RANK[f.severity])


def worst_verdict(verdicts: list[str]) -> str:
    return max(verdicts, key=lambda v: SEVERITY_RANK[v], default="ok")


def error_status(host: str, source: str, finding_id: str, message: str, remedy: str) -> Status:
    """The Status of a host that could not be assessed: one `unknown` finding saying why."""
    status = Status(host=host, source=source)
    status.findings.append(Finding(finding_id, "unknown", message, remedy))
    return status

