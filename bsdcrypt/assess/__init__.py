"""Facts -> Status: the assessment, by subject (os, cpu, driver, persist, geli, userland, findings).

Pure: nothing here runs commands or knows which kind of host the evidence came from. The reasoning
behind every finding is in docs/findings.md.
"""

from __future__ import annotations

import bsdcrypt.assess.findings as advice
import bsdcrypt.assess.userland as userland
from bsdcrypt.assess.consumers import add_consumers
from bsdcrypt.assess.cpu import cpu_info
from bsdcrypt.assess.driver import driver_infos
from bsdcrypt.assess.geli import geli_infos
from bsdcrypt.assess.linux import assess_linux
from bsdcrypt.assess.os import os_info
from bsdcrypt.assess.paste import paste_finding
from bsdcrypt.assess.persist import persist_info
from bsdcrypt.parse import HostFacts, parse
from bsdcrypt.platform import FREEBSD_FAMILY
from bsdcrypt.probe import Evidence, File, StepName, file_step, kldstat_m_step
from bsdcrypt.status import Finding, Status, by_severity

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


def assess(ev: Evidence, host: str, source: str) -> Status:
    """parse, then assess: the Status of a host from its evidence."""
    return assess_facts(parse(ev), host, source)


def assess_facts(f: HostFacts, host: str, source: str) -> Status:
    """The Status of a host from its facts; its findings most severe first (every report lists them in
    this order: text, JSON, YAML, HTML, the fleet's rows)."""
    # kernel crypto consumers (issue 27); the boot's CPU features decide ossl's amd64 AES-GCM
    kld = f.kld if f.kld is not None else []  # kldstat -v, parsed once (not shown: none listed)
    status = add_consumers(f.evidence, _assess_host(f, host, source), f.dmesg.cpu, kld)
    status.findings = by_severity(status.findings)
    return status


def _unknown_os(status: Status, name: str) -> Status:
    # OpenBSD, NetBSD, DragonFly and macOS have kern.osrelease too: only uname -s tells.
    status.os.name = name or None
    what = name or "no operating system bsdcrypt recognises"
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


def _assess_host(f: HostFacts, host: str, source: str) -> Status:
    status = Status(host=host, source=source)
    status.root = f.root
    if f.linux is not None:
        assess_linux(f, f.linux, status)
        return status
    # None: a paste of kldstat or geli list alone names no system (FreeBSD-family tools): unknown
    if f.os_name is not None and f.os_name not in FREEBSD_FAMILY:
        return _unknown_os(status, f.os_name)

    status.os = os_info(f)
    status.cpu = cpu_info(f, status.os.arch, status.os.major)
    drivers = driver_infos(f, status.os, status.cpu)
    status.driver = drivers[0]
    status.other_drivers = drivers[1:]
    status.persist = persist_info(f, status.driver, status.cpu, status.os)
    # geli list shows the providers now; not shown, the ones attached during boot (with the crypto
    # path they got then) are what dmesg.boot shows
    status.geli = geli_infos(f.geli if f.geli is not None else list(f.dmesg.geli), status)
    status.userland_aes = userland.userland_info(f.evidence, status.cpu, status.os.arch)
    status.findings = advice.findings(status) + userland.findings(status)
    missing = [name for name in DECISIVE_STEPS if name not in f.shown]
    if f.pasted:
        status.findings.append(paste_finding(f, status))
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
