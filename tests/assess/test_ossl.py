"""ossl(4)'s algorithms per release x architecture x CPU (bsdcrypt/assess/ossl.py; its docstring names
the sources: releng/13.0 ossl.c @ed0f7721, main's ossl.c @298b6a0e, ossl.4 of 14.0, the post-Aug-2023
sys/modules/ossl/Makefile and ossl_aarch64.c @0aa5cc42). None = the sources read do not settle it."""

from __future__ import annotations

import pytest

from bsdcrypt.assess.ossl import BASE, ossl_algorithms, ossl_offers, ossl_unsettled
from bsdcrypt.facts import CpuFeatures
from bsdcrypt.status import CPUInfo, OSInfo

AES_CPU = CPUInfo(aesni=True)
NO_AES = CPUInfo(aesni=False)
UNKNOWN_CPU = CPUInfo(aesni=None)
AVX = CpuFeatures(features2=frozenset({"AESNI", "AVX", "PCLMULQDQ", "MOVBE"}), stdext2=frozenset())
# the AVX-512 path (ossl_vaes_vpclmulqdq_capable) needs AVX512F/DQ/BW/VL and VAES+VPCLMULQDQ
VAES = CpuFeatures(features2=frozenset({"AESNI", "PCLMULQDQ"}), stdext=frozenset({"AVX512F", "AVX512DQ",
                   "AVX512BW", "AVX512VL"}), stdext2=frozenset({"VAES", "VPCLMULQDQ"}))
VAES_NO_AVX512 = CpuFeatures(features2=frozenset({"AESNI", "PCLMULQDQ"}), stdext=frozenset({"AVX2"}),
                             stdext2=frozenset({"VAES", "VPCLMULQDQ"}))
OLD = CpuFeatures(features2=frozenset({"AESNI", "PCLMULQDQ"}), stdext=frozenset(), stdext2=frozenset())
NO_STDEXT = CpuFeatures(features2=frozenset({"AESNI", "PCLMULQDQ"}))  # Features2 shown, leaf 7 lines not


def os_(release: str, arch: str | None = "amd64") -> OSInfo:
    numbers, branch = release.split("-", 1)
    major, minor = (int(x) for x in numbers.split("."))
    return OSInfo(name="FreeBSD", release=release, major=major, minor=minor, branch=branch, arch=arch)


# (release, arch, cpu, features) -> (AES-CBC, AES-GCM)
TABLE = [
    # releng/13.0: ossl_lookup_cipher knows CRYPTO_CHACHA20 only, AEAD ChaCha20-Poly1305 only
    ("13.0-RELEASE", "amd64", AES_CPU, AVX, False, False),
    ("13.0-RELEASE", "i386", AES_CPU, AVX, False, False),
    ("13.0-RELEASE", "arm64", AES_CPU, None, False, False),
    ("13.0-RC3", "amd64", AES_CPU, AVX, False, False),
    ("13.0-RELEASE", None, AES_CPU, None, False, False),
    # stable/13 and releng/13.1+: no copy of sys/crypto/openssl reachable
    ("13.0-STABLE", "amd64", AES_CPU, AVX, None, None),
    ("13.1-RELEASE", "amd64", AES_CPU, AVX, None, None),
    ("13.2-RELEASE", "arm64", AES_CPU, None, None, None),
    ("13.5-RELEASE", "i386", AES_CPU, AVX, None, None),
    # 14-CURRENT snapshots before and after AES-CBC arrived (about Sept 2021) cannot be told apart
    ("14.0-CURRENT", "amd64", AES_CPU, AVX, None, None),
    # 14.x amd64: AES-CBC with AES-NI; AES-GCM with AVX+PCLMULQDQ+MOVBE or VAES+VPCLMULQDQ
    ("14.0-RELEASE", "amd64", AES_CPU, AVX, True, True),
    ("14.1-RELEASE", "amd64", AES_CPU, VAES, True, True),
    ("14.2-RELEASE", "amd64", AES_CPU, OLD, True, False),
    ("14.2-RELEASE", "amd64", AES_CPU, VAES_NO_AVX512, True, False),
    ("14.2-RELEASE", "amd64", AES_CPU, NO_STDEXT, True, None),  # the AVX-512 test cannot be told
    # a complete CPU block without the leaf-7 lines: identcpu.c prints them only when non-zero
    ("14.2-RELEASE", "amd64", AES_CPU, CpuFeatures(features2=frozenset({"AESNI"}), block_complete=True), True, False),
    ("14.3-STABLE", "amd64", AES_CPU, None, True, None),     # no dmesg.boot: the GCM gate is not shown
    ("14.1-RELEASE", "amd64", NO_AES, AVX, False, False),    # a VM hiding AES-NI: has_aes is false
    ("14.1-RELEASE", "amd64", UNKNOWN_CPU, AVX, None, None),
    # 14.x i386 and arm64: AES-CBC with the CPU's AES, "AES-GCM (amd64 only)"
    ("14.1-RELEASE", "i386", AES_CPU, AVX, True, False),
    ("14.1-RELEASE", "i386", NO_AES, None, False, False),
    ("14.1-RELEASE", "arm64", AES_CPU, None, True, False),
    ("14.1-RELEASE", "aarch64", AES_CPU, None, True, False),
    ("14.1-RELEASE", "arm64", NO_AES, None, None, False),      # vpaes (NEON) path: release not settled
    # 15.x: amd64 as 14.x (the post-Aug-2023 Makefile still builds the GCM code); i386/arm64 GCM open
    ("15.0-RELEASE", "amd64", AES_CPU, AVX, True, True),
    ("15.0-CURRENT", "amd64", AES_CPU, OLD, True, False),
    ("15.0-RELEASE", "i386", AES_CPU, AVX, True, None),
    ("15.0-RELEASE", "arm64", AES_CPU, None, True, None),
    # older kernels have no ossl: nothing is settled
    ("12.4-RELEASE", "amd64", AES_CPU, AVX, None, None),
]


@pytest.mark.parametrize(("release", "arch", "cpu", "features", "cbc", "gcm"), TABLE)
def test_ossl_aes_per_release_arch_cpu(
    release: str, arch: str | None, cpu: CPUInfo, features: CpuFeatures | None, cbc: bool | None, gcm: bool | None
) -> None:
    offers = ossl_offers(os_(release, arch), cpu, features)
    assert (offers["AES-CBC"], offers["AES-GCM"]) == (cbc, gcm)
    # the digests, HMACs and ChaCha20 family are there on every release since 13.0
    assert all(offers[a] is True for a in BASE)
    algos, accelerates = ossl_algorithms(os_(release, arch), cpu, features)
    assert ("AES-CBC" in algos, "AES-GCM" in algos) == (cbc is True, gcm is True)
    assert accelerates is (True if True in (cbc, gcm) else False if (cbc, gcm) == (False, False) else None)
    assert ossl_unsettled(os_(release, arch), cpu, features) == {a for a, v in (("AES-CBC", cbc), ("AES-GCM", gcm))
                                                                 if v is None}


def test_ossl_never_offers_xts_ccm_or_icm() -> None:
    for release in ("13.0-RELEASE", "14.1-RELEASE", "15.0-RELEASE"):
        offers = ossl_offers(os_(release), AES_CPU, AVX)
        assert not {"AES-XTS", "AES-CCM", "AES-ICM"} & set(offers)
