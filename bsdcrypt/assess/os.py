"""The operating system: release, variant, product, architecture, kernel."""

from __future__ import annotations

from bsdcrypt.parse import HostFacts
from bsdcrypt.parsers.version import parse_release
from bsdcrypt.status import OSInfo


def to_int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def os_info(f: HostFacts) -> OSInfo:
    sysctl, dmesg, product, uname = f.sysctl, f.dmesg, f.product, f.uname
    release_text = sysctl.get("kern.osrelease") or ""
    release = parse_release(release_text) if release_text else None
    if release is None and dmesg.banner:
        parts = dmesg.banner.split()
        release = parse_release(parts[1]) if len(parts) > 1 else None
    if release is None and uname.get("release"):
        release = parse_release(uname["release"])
    hbsd = (
        "hardening.version" in sysctl
        or (release is not None and release.hbsd)
        or dmesg.hardenedbsd
    )
    name = f.os_name or dmesg.os_name
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
        userland=f.userland_version or f.os_release.get("VERSION"),
        kernel_installed=f.kernel_installed,
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

