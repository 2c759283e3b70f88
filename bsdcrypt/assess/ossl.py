"""What ossl(4) offers on a release, architecture and CPU: True, False, or None where the sources
bsdcrypt could read do not settle it.

ossl0's device description is just "OpenSSL crypto" (ossl.c ossl_probe), so nothing on the host lists
its algorithms: they come from sys/crypto/openssl/ossl.c (ossl_probesession, ossl_lookup_cipher,
ossl_lookup_hash), the per-architecture ossl_cpuid() and sys/modules/ossl/Makefile of each branch.
What was read (freebsd/freebsd-src):
* releng/13.0, ossl.c @ed0f7721 (Mar 2021): digests and HMACs (SHA1, SHA2-224/256/384/512), Poly1305,
  ChaCha20 (CSP_MODE_CIPHER) and ChaCha20-Poly1305 (CSP_MODE_AEAD) only: no AES on any architecture.
* main, ossl.c @298b6a0e (after Sept 2021): ossl_lookup_cipher gains CRYPTO_AES_CBC, accepted for
  CIPHER and ETA sessions only when ossl_cpuid() set has_aes; AEAD is still ChaCha20-Poly1305 only.
  ossl.4 of 14.0 (@197ff4c3) lists AES-CBC and "AES-GCM (amd64 only)": has_aes is the AESNI CPUID bit
  on x86 and HWCAP_AES on arm64; amd64 AES-GCM needs AVX+PCLMULQDQ+MOVBE or the AVX-512 VAES set
  (ossl_x86.c below; 14.0 had it: FreeBSD-EN-23:17.ossl fixed its AES-GCM, listed in 14.0's errata).
* main after Aug 2023 (sys/modules/ossl/Makefile and ossl_aarch64.c @0aa5cc42): amd64 builds
  aesni-gcm/aes-gcm-avx512 + ossl_aes_gcm.c (AES-GCM), i386 only aesni-x86.S (AES-CBC), aarch64
  vpaes/aesv8 for AES-CBC (has_aes also with NEON alone) and no AES-GCM; armv7 gained AES-GCM.
Not reachable: any stable/13 or releng/13.1+ copy of sys/crypto/openssl, so AES on 13.1-13.x is
unknown (docs/notes.md, issue 15 and issue 27); which 14-CURRENT snapshot gained AES-CBC; whether
15.x i386/arm64 gained AES-GCM; whether arm64 without AES instructions gets AES-CBC (vpaes) on 14.x.
ossl never offers AES-XTS (GELI's default), AES-CCM or AES-ICM on any branch read.
"""

from __future__ import annotations

from bsdcrypt.facts import CpuFeatures
from bsdcrypt.platform import ARM64
from bsdcrypt.status import CPUInfo, OSInfo

AES = ("AES-CBC", "AES-GCM")
# Offered on every release since 13.0, on every architecture ossl builds for (ossl.c @ed0f7721).
BASE = (
    "ChaCha20", "ChaCha20-Poly1305", "Poly1305", "SHA1", "SHA1-HMAC", "SHA2-224", "SHA2-224-HMAC",
    "SHA2-256", "SHA2-256-HMAC", "SHA2-384", "SHA2-384-HMAC", "SHA2-512", "SHA2-512-HMAC",
)
# The amd64 AES-GCM code paths of ossl_x86.c ossl_cpuid(), once AESNI_CAPABLE set has_aes:
# ossl_vaes_vpclmulqdq_capable() (OpenSSL's test of OPENSSL_ia32cap_P[2..3] against 0x600c0030000:
# AVX512F, AVX512DQ, AVX512BW, AVX512VL in leaf 7 EBX and VAES, VPCLMULQDQ in ECX) picks the AVX-512
# code, else cpu_feature2 having CPUID2_AVX | CPUID2_PCLMULQDQ | CPUID2_MOVBE picks aesni-gcm; else
# has_aes_gcm = false. On i386 (#else) has_aes_gcm is always false.
_GCM_F2 = frozenset({"AVX", "PCLMULQDQ", "MOVBE"})
_GCM_STDEXT = frozenset({"AVX512F", "AVX512DQ", "AVX512BW", "AVX512VL"})
_GCM_EXT2 = frozenset({"VAES", "VPCLMULQDQ"})


def _generation(os: OSInfo) -> str | None:
    """Which of the branches read this kernel is: "13.0", "14", "15+", or None (not settled)."""
    if os.major is None or os.major < 13:
        return None  # ossl first appeared in 13.0: an unknown or odd kernel
    if os.major == 13:
        stable = os.branch in ("STABLE", "PRERELEASE", "CURRENT")
        return "13.0" if os.minor == 0 and not stable else None
    if os.major == 14:
        return None if os.branch == "CURRENT" else "14"
    return "15+"  # main after 14.0 branched: everything releng/14.0 had


def _gcm_cpu(features: CpuFeatures | None) -> bool | None:
    """Does the boot's CPU pass either amd64 AES-GCM test (None: the lines it needs were not shown)?"""
    if features is None:
        return None
    f2, ext, ext2 = features.features2, features.stdext, features.stdext2
    if features.block_complete:
        # identcpu.c prints the leaf-7 lines only when they are non-zero: a complete CPU block that
        # lacks one shows a CPU without those bits
        ext, ext2 = ext or frozenset(), ext2 or frozenset()
    if f2 is not None and _GCM_F2 <= f2:
        return True
    vaes = None if ext is None or ext2 is None else (_GCM_STDEXT <= ext and _GCM_EXT2 <= ext2)
    if vaes:
        return True
    return None if f2 is None or vaes is None else False


def _aes_cbc(arm64: bool, cpu: CPUInfo) -> bool | None:
    if cpu.aesni:
        return True
    if cpu.aesni is None:
        return None
    # no AES instructions: x86 has_aes is the AESNI bit itself; arm64's vpaes (NEON) path is in the
    # post-Aug-2023 tree only, which release it reached is not settled
    return None if arm64 else False


def _aes_gcm(gen: str, arch: str | None, cpu: CPUInfo, features: CpuFeatures | None) -> bool | None:
    if arch == "amd64":
        if cpu.aesni is False:
            return False
        gcm = _gcm_cpu(features)
        return None if cpu.aesni is None or gcm is None else gcm
    if gen == "14":
        return False  # ossl.4 of 14.0: "AES-GCM (amd64 only)"
    return None  # 15+: i386/arm64 AES-GCM not settled by the sources read


def ossl_offers(os: OSInfo, cpu: CPUInfo, features: CpuFeatures | None) -> dict[str, bool | None]:
    """Per algorithm (AES-CBC, AES-GCM, then BASE): does an attached ossl0 offer it here?"""
    gen = _generation(os)
    offers: dict[str, bool | None] = {}
    if gen is None or os.arch is None:
        offers.update(dict.fromkeys(AES, False if gen == "13.0" else None))
    elif gen == "13.0":
        offers.update(dict.fromkeys(AES, False))
    else:
        offers["AES-CBC"] = _aes_cbc(os.arch in ARM64, cpu)
        offers["AES-GCM"] = _aes_gcm(gen, os.arch, cpu, features) if offers["AES-CBC"] is not False else False
    offers.update(dict.fromkeys(BASE, True))
    return offers


def ossl_algorithms(os: OSInfo, cpu: CPUInfo, features: CpuFeatures | None) -> tuple[list[str], bool | None]:
    """(the algorithms ossl0 offers for sure, accelerates_aes: True if it does some AES, False if the
    sources say it does none here, None if that is not settled)."""
    offers = ossl_offers(os, cpu, features)
    aes = [offers[a] for a in AES]
    accelerates = True if any(aes) else (False if all(v is False for v in aes) else None)
    return [a for a, v in offers.items() if v], accelerates


def ossl_unsettled(os: OSInfo, cpu: CPUInfo, features: CpuFeatures | None) -> frozenset[str]:
    """The algorithms whose answer the sources do not settle on this host."""
    return frozenset(a for a, v in ossl_offers(os, cpu, features).items() if v is None)
