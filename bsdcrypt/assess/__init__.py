"""Facts -> Status: the assessment, by subject (os, cpu, driver, persist, geli, userland, findings).

Pure: nothing here runs commands or knows which kind of host the evidence came from. The reasoning
behind every finding is in docs/findings.md.
"""

from __future__ import annotations

import bsdcrypt.assess.findings as advice
import bsdcrypt.assess.userland as userland
from bsdcrypt.assess.consumers import add_consumers
from bsdcrypt.assess.cpu import cpu_info, sysctl_dev
from bsdcrypt.assess.driver import driver_infos
from bsdcrypt.assess.geli import geli_infos
from bsdcrypt.assess.linux import assess_linux
from bsdcrypt.assess.os import dmesg_of, os_info, raw_text
from bsdcrypt.assess.paste import paste_finding
from bsdcrypt.assess.persist import persist_info
from bsdcrypt.parsers.geli import parse_geli_list
from bsdcrypt.parsers.sysctl import parse_sysctl
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
    """The Status of a host from its evidence; its findings most severe first (every report lists
    them in this order: text, JSON, YAML, HTML, the fleet's rows)."""
    status = add_consumers(ev, _assess_host(ev, host, source))  # kernel crypto consumers (issue 27)
    status.findings = by_severity(status.findings)
    return status


def _assess_host(ev: Evidence, host: str, source: str) -> Status:
    status = Status(host=host, source=source)
    sysctl = parse_sysctl(raw_text(ev, StepName.SYSCTL))
    dmesg = dmesg_of(ev)
    uname_s = (ev.text(StepName.UNAME_S) or "").strip() or sysctl.get("kern.ostype") or dmesg.os_name
    status.root = None if ev.text(StepName.ID_U) is None else (ev.text(StepName.ID_U) or "").strip() == "0"

    if uname_s == "Linux":
        assess_linux(ev, status)
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

    status.os = os_info(ev, sysctl, dmesg, uname_s)
    dev = sysctl_dev(ev)
    status.cpu = cpu_info(ev, sysctl, dev, dmesg, status.os.arch, status.os.major)
    drivers = driver_infos(ev, dev, dmesg, status.os, status.cpu)
    status.driver = drivers[0]
    status.other_drivers = drivers[1:]
    status.persist = persist_info(ev, status.driver, status.cpu, status.os, dmesg)
    # geli list shows the providers now; without it, the ones attached during boot (with the crypto
    # path they got then) are what dmesg.boot shows
    if ev.step(StepName.GELI_LIST) is not None or ev.origin != "paste":
        providers = parse_geli_list(raw_text(ev, StepName.GELI_LIST))
    else:
        providers = list(dmesg.geli)
    status.geli = geli_infos(providers, status)
    status.userland_aes = userland.userland_info(ev, status.cpu, status.os.arch)
    status.findings = advice.findings(status) + userland.findings(status)
    missing = [name for name in DECISIVE_STEPS if name not in ev.steps]
    if ev.origin == "paste":
        status.findings.append(paste_finding(ev, status))
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

