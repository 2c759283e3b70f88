"""Issue 27's algorithm gaps, against each driver situation: what setkey prints for an SA (a name or a
number: fixtures/parsers/setkey/derived-14-chacha20-poly1305-aead.txt, derived-12-aes-gmac-printed-as-
number.txt), ossl(4) as the only driver for a cipher (its per-release table: assess/ossl.py), and KTLS's
AES-CBC sessions, whose HMAC is a second OCF session (sys/opencrypto/ktls_ocf.c ktls_ocf_try)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assess.test_consumers import CPUS, DRIVERS
from bsdcrypt.assess.consumers import cipher_verdict, consumers, findings
from bsdcrypt.facts import CpuFeatures
from bsdcrypt.probe import Evidence, Step
from bsdcrypt.status import ConsumerInfo, DriverInfo, OSInfo, Status

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "parsers"
# the dmesg.boot CPU features ossl's amd64 AES-GCM needs (ossl_x86.c), and a CPU with AES-NI but no AVX
AVX = CpuFeatures(features2=frozenset({"AESNI", "AVX", "PCLMULQDQ", "MOVBE"}), stdext2=frozenset())
NO_AVX = CpuFeatures(features2=frozenset({"AESNI", "PCLMULQDQ"}), stdext=frozenset(), stdext2=frozenset())


def out(fixture: str) -> bytes:
    return (FIX / fixture).read_text().split("# ---\n", 1)[1].encode()


def host(cpu: str, driver: str, release: str = "13.0-RELEASE", arch: str = "amd64",
         ossl: list[str] | None = None) -> Status:
    major, minor = (int(x) for x in release.split("-")[0].split("."))
    s = Status(host="h", source="t")
    s.os = OSInfo(name="FreeBSD", major=major, minor=minor, release=release, branch=release.split("-")[1], arch=arch)
    s.cpu = CPUS[cpu]
    s.driver = DRIVERS[driver]
    if ossl is not None:
        s.other_drivers = [DriverInfo(name="ossl", state="loaded", attached=True, algorithms=ossl)]
    return s


def kinds(s: Status, features: CpuFeatures | None = None, **steps: tuple[int, bytes]) -> dict[str, ConsumerInfo]:
    s.consumers = consumers(Evidence({k: Step(rc, data) for k, (rc, data) in steps.items()}), s, features)
    return {c.kind: c for c in s.consumers}


# 1. ChaCha20-Poly1305 SAs and the numbers setkey prints
CHACHA = (0, out("setkey/derived-14-chacha20-poly1305-aead.txt"))


@pytest.mark.parametrize(("cpu", "driver"), [
    ("aesni", "attached"), ("aesni", "not-loaded"), ("hidden", "no-device"), ("absent", "no-device"),
])
def test_chacha20_poly1305_sas_are_not_affected_in_every_driver_state(cpu: str, driver: str) -> None:
    s = host(cpu, driver, "14.1-RELEASE")
    c = kinds(s, setkey_sad=CHACHA)["ipsec"]
    assert [(i.name, i.cipher, i.verdict) for i in c.items] == [("2 ESP SAs", "ChaCha20-Poly1305", "not-affected")]
    assert c.verdict == "not-affected" and findings(s) == []


def test_an_aes_gmac_sa_printed_as_23_is_named_but_unknown() -> None:
    s = host("aesni", "attached", "12.2-RELEASE")
    c = kinds(s, setkey_sad=(0, out("setkey/derived-12-aes-gmac-printed-as-number.txt")))["ipsec"]
    item = c.items[0]
    assert (item.cipher, item.verdict, item.algorithm) == ("AES-GMAC", "unknown", "23")
    assert "number 23" in (item.why or "") and "aes-gmac" in (item.why or "")
    assert findings(s) == []  # unknown is never counted as software now


def test_a_number_no_pfkeyv2_value_names_stays_unknown_and_a_named_number_reads_as_its_name() -> None:
    probe = b"\tesp mode=tunnel\n\tE: 99\n\tstate=mature\n\tesp mode=tunnel\n\tE: 12\n\tA: hmac-sha2-256\n\tstate=mature\n"
    c = kinds(host("aesni+sha", "attached+sha", "13.2-RELEASE"), setkey_sad=(0, probe))["ipsec"]
    unnamed, cbc = c.items
    assert unnamed.cipher is None and unnamed.verdict == "unknown" and "no FreeBSD pfkeyv2.h value" in (unnamed.why or "")
    assert (cbc.cipher, cbc.verdict, cbc.by) == ("AES-CBC", "accelerated", "aesni")
    # the same SA with its name reads the same
    named = kinds(host("aesni+sha", "attached+sha", "13.2-RELEASE"),
                  setkey_sad=(0, b"\tesp mode=tunnel\n\tE: aes-cbc\n\tA: hmac-sha2-256\n\tstate=mature\n"))["ipsec"]
    assert (named.items[0].verdict, named.items[0].by) == ("accelerated", "aesni")


# 2. ossl(4) as the only driver: accelerated only where its release offers the cipher
GCM_SA = (0, out("setkey/bsdrp-ipsec-lab-aes-gcm-16-static.txt"))
ZFS_GCM = (0, b"zroot/enc\tencryption\taes-256-gcm\nzroot/enc\tkeystatus\tavailable\n")
OSSL_BASE = ["ChaCha20", "ChaCha20-Poly1305", "Poly1305", "SHA1", "SHA1-HMAC", "SHA2-256", "SHA2-256-HMAC",
             "SHA2-384-HMAC"]


@pytest.mark.parametrize(("release", "ossl", "features", "verdict", "by"), [
    ("13.0-RELEASE", OSSL_BASE, AVX, "software", None),        # releng/13.0 ossl.c: no AES at all
    ("13.2-RELEASE", OSSL_BASE, AVX, "unknown", None),         # 13.1-13.x sources not reachable
    ("13.0-STABLE", OSSL_BASE, AVX, "unknown", None),
    ("14.1-RELEASE", ["AES-CBC", "AES-GCM", *OSSL_BASE], AVX, "accelerated", "ossl"),
    ("14.1-RELEASE", ["AES-CBC", *OSSL_BASE], NO_AVX, "software", None),  # AES-NI but no AVX/VAES: no GCM
    ("14.1-RELEASE", ["AES-CBC", *OSSL_BASE], None, "unknown", None),     # the CPU's features not shown
    ("15.0-RELEASE", ["AES-CBC", "AES-GCM", *OSSL_BASE], AVX, "accelerated", "ossl"),
])
def test_an_aes_gcm_sa_and_dataset_with_only_ossl_attached(
    release: str, ossl: list[str], features: CpuFeatures | None, verdict: str, by: str | None
) -> None:
    s = host("aesni", "not-loaded", release, ossl=ossl)
    k = kinds(s, features, setkey_sad=GCM_SA, zfs_crypto=ZFS_GCM)
    for kind in ("ipsec", "zfs"):
        assert (k[kind].items[0].verdict, k[kind].items[0].by) == (verdict, by), kind
    if verdict == "unknown":
        assert "not settled" in (k["ipsec"].items[0].why or "") and release in (k["ipsec"].items[0].why or "")


def test_ossl_on_i386_14_does_aes_cbc_but_never_gcm() -> None:
    s = host("aesni", "not-loaded", "14.1-RELEASE", arch="i386", ossl=["AES-CBC", *OSSL_BASE])
    assert cipher_verdict("AES-GCM", s, features=AVX)[0] == "software"
    assert cipher_verdict("AES-CBC", s, "hmac-sha2-256", AVX)[:2] == ("accelerated", "ossl")


# 3. KTLS per counter: kern.ipc.tls.sw.{cbc,gcm,chacha20} (sysctl(8) `name: value`, uipc_ktls.c names)
KTLS_ALL = (0, b"kern.ipc.tls.enable: 1\nkern.ipc.tls.sw.chacha20: 1\nkern.ipc.tls.sw.gcm: 2\n"
               b"kern.ipc.tls.sw.cbc: 3\n")


def _ktls_items(s: Status, features: CpuFeatures | None = None) -> dict[str, tuple[str, str | None, str]]:
    return {i.cipher or "": (i.verdict, i.by, i.why or "") for i in kinds(s, features, sysctl_ktls=KTLS_ALL)["ktls"].items}


def test_ktls_each_counter_gets_its_own_verdict() -> None:
    items = _ktls_items(host("aesni", "attached", "14.1-RELEASE"))
    assert items["AES-GCM"][:2] == ("accelerated", "aesni")
    assert items["AES-CBC"][:2] == ("accelerated", "aesni")   # the AES-CBC cipher session
    assert items["ChaCha20-Poly1305"][0] == "not-affected"


@pytest.mark.parametrize(("cpu", "driver", "ossl", "hmacs"), [
    # aesni_auth_supported: SHA1/SHA2-224/SHA2-256 HMAC only with the CPU's SHA extensions, never SHA2-384
    ("aesni", "attached", None, ["HMAC-SHA1 in software", "HMAC-SHA256 in software", "HMAC-SHA384 in software"]),
    ("aesni+sha", "attached+sha", None, ["HMAC-SHA1 by aesni0", "HMAC-SHA256 by aesni0", "HMAC-SHA384 in software"]),
    # ossl offers every HMAC (ossl_lookup_hash): SHA384 goes to it
    ("aesni+sha", "attached+sha", ["AES-CBC", *OSSL_BASE],
     ["HMAC-SHA1 by aesni0", "HMAC-SHA256 by aesni0", "HMAC-SHA384 by ossl0"]),
])
def test_ktls_cbc_names_who_computes_each_possible_hmac(
    cpu: str, driver: str, ossl: list[str] | None, hmacs: list[str]
) -> None:
    verdict, by, why = _ktls_items(host(cpu, driver, "14.1-RELEASE", ossl=ossl), AVX)["AES-CBC"]
    assert (verdict, by) == ("accelerated", "aesni")
    assert "separate session" in why and all(h in why for h in hmacs), why


def test_ktls_cbc_on_a_vm_hiding_aesni_is_software_for_the_cipher() -> None:
    items = _ktls_items(host("hidden", "no-device", "14.1-RELEASE"))
    assert items["AES-CBC"][0] == "software" and items["AES-GCM"][0] == "software"
    assert "HMAC-SHA384 in software" in items["AES-CBC"][2]


def test_ktls_without_the_sw_counters_is_unknown_not_unused() -> None:
    # an excerpt with only the NIC (ifnet) counters proves a KTLS kernel but shows no software session
    ifnet = (0, b"kern.ipc.tls.ifnet.gcm: 0\nkern.ipc.tls.ifnet.chacha20: 0\n")
    c = kinds(host("aesni", "attached", "15.0-RELEASE"), sysctl_ktls=ifnet)["ktls"]
    assert (c.present, c.verdict, c.items) == (None, "unknown", [])
    assert "software sessions not shown" in c.detail and "kern.ipc.tls.sw" in (c.reason or "")


# OpenVPN DCO: group openvpn is if_ovpn's cloner group, but pfSense/OPNsense put their tun/tap-based
# OpenVPN interfaces there too (pfSense openvpn.inc); those are also in group tun or tap
@pytest.mark.parametrize(("variant", "release", "listing", "present", "verdict", "names"), [
    ("freebsd", "14.1-RELEASE", b"== openvpn\novpn0\n== wg\n", True, "unknown", ["ovpn0"]),
    ("pfsense", "14.0-CURRENT", b"== openvpn\novpns1\novpn0\n== wg\n", None, "unknown", ["ovpns1", "ovpn0"]),
    ("pfsense", "14.0-CURRENT", b"== openvpn\novpns1\novpn0\n== wg\n== tun\novpns1\n== tap\n", True, "unknown",
     ["ovpn0"]),
    ("pfsense", "14.0-CURRENT", b"== openvpn\novpns1\n== wg\n== tun\n== tap\novpns1\n", False, "not-in-use", []),
    ("pfsense", "12.3-RELEASE", b"== openvpn\novpns1\n== wg\n", False, "not-in-use", []),  # no if_ovpn before 14.0
    ("freebsd", "13.2-RELEASE", b"== wg\n", False, "not-in-use", []),  # openvpn group not listed: the release tells
])
def test_ovpn_dco_tells_dco_from_openvpn_over_tun(
    variant: str, release: str, listing: bytes, present: bool | None, verdict: str, names: list[str]
) -> None:
    s = host("aesni", "attached", release)
    s.os.variant = variant
    c = kinds(s, tunnel_groups=(0, listing))["ovpn-dco"]
    assert (c.present, c.verdict, [i.name for i in c.items]) == (present, verdict, names)
    if present is None:
        assert "ifconfig -g tun" in (c.reason or "")
