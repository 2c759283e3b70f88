"""A Linux host: what little bsdcrypt says of it."""

from __future__ import annotations

import bsdcrypt.assess.userland as userland
from bsdcrypt.assess.os import file_text, raw_text
from bsdcrypt.parsers.linux import parse_cpuinfo_flags, parse_cpuinfo_model
from bsdcrypt.parsers.osrelease import parse_os_release
from bsdcrypt.probe import Evidence, File, StepName
from bsdcrypt.status import CPUInfo, DriverInfo, Finding, OSInfo, Status


def assess_linux(ev: Evidence, status: Status) -> None:
    osr = parse_os_release(file_text(ev, File.OS_RELEASE) or "")
    flags = parse_cpuinfo_flags(raw_text(ev, StepName.LINUX_CPU_FLAGS))
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
        model=parse_cpuinfo_model(raw_text(ev, StepName.LINUX_CPU_FLAGS)),
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

