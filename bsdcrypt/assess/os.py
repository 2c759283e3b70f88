"""The operating system (release, variant, product, arch, kernel), and the evidence helpers of every subject."""

from __future__ import annotations

from dataclasses import replace

from bsdcrypt.facts import DmesgBoot
from bsdcrypt.parsers.dmesg import parse_dmesg
from bsdcrypt.parsers.osrelease import parse_os_release, parse_product
from bsdcrypt.parsers.version import parse_freebsd_version, parse_release, parse_uname_a
from bsdcrypt.probe import Evidence, File, StepName
from bsdcrypt.status import OSInfo


def raw_text(ev: Evidence, name: str) -> str:
    """Output of a step whatever its exit status (sysctl exits 1 if any OID is unknown)."""
    st = ev.step(name)
    return st.text if st is not None else ""


def file_text(ev: Evidence, path: str) -> str | None:
    data = ev.file(path)
    return data.decode("utf-8", errors="replace") if data is not None else None


def to_int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def dmesg_of(ev: Evidence) -> DmesgBoot:
    """The last boot of dmesg.boot; a filtered paste (`dmesg | grep ...`) only for what its lines show."""
    text = file_text(ev, File.DMESG_BOOT)
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


def os_info(ev: Evidence, sysctl: dict[str, str], dmesg: DmesgBoot, uname_s: str | None) -> OSInfo:
    osr = parse_os_release(file_text(ev, File.RUN_OS_RELEASE) or "")
    product = parse_product(
        file_text(ev, File.PLATFORM),
        file_text(ev, File.VERSION),
        ev.text(StepName.OPNSENSE_VERSION),
        ev.text(StepName.GHOSTBSD_VERSION),
        file_text(ev, File.PFSENSE_RELEASE),
    )
    release_text = sysctl.get("kern.osrelease") or ""
    release = parse_release(release_text) if release_text else None
    if release is None and dmesg.banner:
        parts = dmesg.banner.split()
        release = parse_release(parts[1]) if len(parts) > 1 else None
    uname = parse_uname_a(ev.text(StepName.UNAME_A) or "")
    if release is None and uname.get("release"):
        release = parse_release(uname["release"])
    hbsd = (
        "hardening.version" in sysctl
        or (release is not None and release.hbsd)
        or dmesg.hardenedbsd
    )
    name = uname_s or dmesg.os_name
    base = "hardenedbsd" if hbsd else ("midnightbsd" if name == "MidnightBSD" else "freebsd")
    info = OSInfo(
        name=name,
        variant=product.variant if product else base,
        base=base,
        product=f"{product.name} {product.version}".strip() if product and product.version else None,
        release=release.raw if release else (release_text or None),
        major=release.major if release else None,
        minor=release.minor if release else None,
        branch=release.branch if release else None,
        patch=release.patch if release else None,
        userland=parse_freebsd_version(ev.text(StepName.FREEBSD_VERSION_U) or "") or osr.get("VERSION"),
        kernel_installed=parse_freebsd_version(ev.text(StepName.FREEBSD_VERSION_K) or ""),
        osreldate=to_int(sysctl.get("kern.osreldate")),
        # the running kernel's own words first; dmesg.boot's banner is the same boot's
        arch=sysctl.get("hw.machine_arch") or machine_arch(uname.get("machine") or dmesg.arch),
        kernel_ident=sysctl.get("kern.ident") or uname.get("ident") or dmesg.kernel_ident,
    )
    if product and not info.product:
        info.product = product.name
    return info


def machine_arch(machine: str | None) -> str | None:
    """uname -m / the banner give MACHINE; hw.machine_arch of arm64 is aarch64 (amd64, i386: the same)."""
    return {"arm64": "aarch64"}.get(machine or "", machine)

