"""A Linux host: what little bsdcrypt says of it."""

from __future__ import annotations

import bsdcrypt.assess.userland as userland
from bsdcrypt.parse import HostFacts, LinuxFacts
from bsdcrypt.status import CPUInfo, DriverInfo, Finding, OSInfo, Status


def assess_linux(f: HostFacts, lx: LinuxFacts, status: Status) -> None:
    osr, flags, words = lx.os_release, lx.cpu_flags, lx.uname_words
    status.os = OSInfo(
        name="Linux",
        variant=osr.get("ID", "linux"),
        product=osr.get("PRETTY_NAME"),
        release=words[2] if len(words) > 2 else None,
        arch=words[-2] if len(words) > 2 and words[-1] == "GNU/Linux" else (words[-1] if words else None),
    )
    aes = None if flags is None else ("aes" in flags)
    status.cpu = CPUInfo(
        model=lx.cpu_model,
        aesni=aes,
        sha=None if flags is None else ("sha_ni" in flags),
        vm=None if flags is None else ("hypervisor" in flags),
    )
    state = "unknown" if lx.aesni_intel is None else ("loaded" if lx.aesni_intel else "not-loaded")
    status.driver = DriverInfo(name="aesni_intel", state=state)  # type: ignore[arg-type]
    status.userland_aes = userland.userland_info(f.evidence, status.cpu, status.os.arch)
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
