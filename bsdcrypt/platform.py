"""What bsdcrypt knows about the FreeBSD family: which systems, which appliances, which AES drivers.

Plain data for the assessment, the planner and the renderers (imports nothing of bsdcrypt).
"""

from __future__ import annotations

# uname -s of the systems with FreeBSD's kernel crypto, GELI and loader(8) (HardenedBSD says FreeBSD).
FREEBSD_FAMILY = frozenset({"FreeBSD", "MidnightBSD"})

# Products built on FreeBSD that build their own kernel config (pfSense "pfSense", OPNsense "SMP", TrueNAS
# "TRUENAS", FreeNAS "FreeNAS.amd64") and write /boot/loader.conf themselves from their own settings.
APPLIANCES = ("pfsense", "opnsense", "truenas", "freenas")
# Appliances whose GUI setting loads the crypto module at boot (not loader.conf).
GUI_LOADED = frozenset({"pfsense", "opnsense"})

# hw.machine_arch / uname -m spellings per architecture.
X86 = frozenset({"amd64", "i386"})
ARM64 = frozenset({"aarch64", "arm64"})

# The kernel AES drivers: aesni(4) on x86, armv8crypto(4) on arm64 (GENERIC compiles both in from 13.0).
AES_DRIVERS = ("aesni", "armv8crypto")
# Every kernel crypto driver the assessment looks at, in report order.
KERNEL_DRIVERS = ("aesni", "armv8crypto", "ossl", "padlock")


def primary_driver(arch: str | None) -> str | None:
    """The kernel AES driver of an architecture; None where it has none."""
    if arch in X86:
        return "aesni"
    if arch in ARM64:
        return "armv8crypto"
    return None
