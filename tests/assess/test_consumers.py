"""Table tests of the kernel-consumer assessment (issue 27): every consumer against each driver state
and CPU (AES-NI shown, hidden by a hypervisor, absent), on the real and derived outputs of
fixtures/parsers/{zfs,setkey,ktls,tunnels}."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsdcrypt.assess.consumers import cipher_verdict, consumers, findings, in_use_with_aes
from bsdcrypt.probe import Evidence, Step, StepName
from bsdcrypt.status import CPUInfo, DriverInfo, GeliInfo, OSInfo, Status

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "parsers"
# The CPUs and driver states every consumer table tests against (also read by test_consumers_real and
# test_consumer_algorithms).
AESNI_13 = ["AES-CBC", "AES-CCM", "AES-GCM", "AES-ICM", "AES-XTS"]


def out(fixture: str) -> bytes:
    return (FIX / fixture).read_text().split("# ---\n", 1)[1].encode()


# CPU x driver situations: (cpu, primary driver, other drivers)
CPUS = {
    "aesni": CPUInfo(model="x", aesni=True, sha=False, vm=False),
    "aesni+sha": CPUInfo(model="x", aesni=True, sha=True, vm=False),
    "hidden": CPUInfo(model="x", aesni=False, sha=False, vm=True, hypervisor="kvm"),
    "absent": CPUInfo(model="x", aesni=False, sha=False, vm=False),
}
DRIVERS = {
    "attached": DriverInfo(name="aesni", state="builtin", attached=True, algorithms=AESNI_13, accelerates_aes=True),
    "attached+sha": DriverInfo(name="aesni", state="builtin", attached=True, algorithms=[*AESNI_13, "SHA1", "SHA256"],
                               accelerates_aes=True),
    "not-loaded": DriverInfo(name="aesni", state="not-loaded", attached=False, accelerates_aes=False),
    "no-device": DriverInfo(name="aesni", state="no-device", attached=False, accelerates_aes=False),
    "unknown": DriverInfo(name="aesni", state="unknown", reason="kldstat -v was not collected"),
    "armv8": DriverInfo(name="armv8crypto", state="builtin", attached=True,
                        algorithms=["AES-CBC", "AES-XTS", "AES-GCM"], accelerates_aes=True),
}


def status(cpu: str, driver: str, major: int = 13) -> Status:
    s = Status(host="h", source="t")
    s.os = OSInfo(name="FreeBSD", major=major, minor=0, release=f"{major}.0-RELEASE", arch="amd64")
    s.cpu = CPUS[cpu]
    s.driver = DRIVERS[driver]
    return s


def ev(**steps: tuple[int, bytes]) -> Evidence:
    return Evidence({k: Step(rc, data) for k, (rc, data) in steps.items()})


def by_kind(s: Status, e: Evidence) -> dict[str, object]:
    s.consumers = consumers(e, s)
    return {c.kind: c for c in s.consumers}


# cipher_verdict: the core table. (cipher, auth, cpu, driver) -> (verdict, by)
VERDICTS = [
    ("AES-GCM", None, "aesni", "attached", "accelerated", "aesni"),
    ("AES-GCM", None, "aesni", "not-loaded", "software", None),     # 12.x, aesni not loaded: a warning
    ("AES-GCM", None, "aesni", "no-device", "software", None),
    ("AES-GCM", None, "aesni", "unknown", "unknown", None),
    ("AES-GCM", None, "hidden", "not-loaded", "software", None),    # the VM hides AES-NI
    ("AES-GCM", None, "hidden", "no-device", "software", None),
    ("AES-GCM", None, "absent", "no-device", "software", None),
    ("ChaCha20-Poly1305", None, "aesni", "not-loaded", "not-affected", None),  # a ChaCha20 SA: not affected
    ("ChaCha20-Poly1305", None, "hidden", "no-device", "not-affected", None),
    ("NULL", None, "absent", "no-device", "not-affected", None),
    ("AES-CBC", "hmac-sha2-256", "aesni", "attached", "software", None),        # no SHA-NI: the HMAC is not there
    ("AES-CBC", "hmac-sha2-256", "aesni", "attached+sha", "accelerated", "aesni"),
    ("AES-CBC", "hmac-md5", "aesni", "attached+sha", "software", None),
    ("AES-CCM", None, "aesni", "armv8", "software", None),           # armv8crypto offers no AES-CCM
    ("AES-GCM", None, "aesni", "armv8", "accelerated", "armv8crypto"),
    (None, None, "aesni", "attached", "unknown", None),
]


@pytest.mark.parametrize("cipher,auth,cpu,driver,verdict,by", VERDICTS)
def test_cipher_verdict(cipher: str | None, auth: str | None, cpu: str, driver: str, verdict: str,
                        by: str | None) -> None:
    got = cipher_verdict(cipher, status(cpu, driver), auth)
    assert got[:2] == (verdict, by), got


def test_an_attached_driver_without_the_cipher_leaves_it_in_software_another_one_takes_it() -> None:
    # aesni of 11.x offers no AES-CCM: an AES-CCM session runs in software; ossl(4) attached beside it
    # (algorithms as assess.ossl_algorithms gives them on 14.0 amd64) does not offer CCM either
    s = status("aesni", "attached")
    s.driver = DriverInfo(name="aesni", state="loaded", attached=True,
                          algorithms=["AES-CBC", "AES-XTS", "AES-GCM", "AES-ICM"], accelerates_aes=True)
    assert cipher_verdict("AES-CCM", s)[0] == "software"
    s.other_drivers = [DriverInfo(name="ossl", state="loaded", attached=True, algorithms=["AES-CBC", "AES-GCM"])]
    assert cipher_verdict("AES-CCM", s)[0] == "software"
    assert cipher_verdict("AES-GCM", s)[:2] == ("accelerated", "aesni")
    s.driver = DriverInfo(name="aesni", state="not-loaded", attached=False)
    assert cipher_verdict("AES-GCM", s)[:2] == ("accelerated", "ossl")


ZFS = (StepName.ZFS_CRYPTO, (0, out("zfs/derived-zfs-get-H-probe.txt")))


@pytest.mark.parametrize("cpu,driver,verdict", [
    ("aesni", "attached", "accelerated"), ("aesni", "not-loaded", "software"),
    ("hidden", "no-device", "software"), ("absent", "no-device", "software"), ("aesni", "unknown", "unknown"),
])
def test_zfs_datasets(cpu: str, driver: str, verdict: str) -> None:
    c = by_kind(status(cpu, driver), ev(**dict([ZFS])))["zfs"]
    assert c.present is True and c.verdict == verdict
    items = {i.name: i for i in c.items}
    assert items["zroot/enc"].cipher == "AES-GCM" and items["zroot/enc"].verdict == verdict
    assert items["tank/vol0"].verdict == "not-in-use" and items["tank/vol0"].state == "unavailable"
    assert items["tank/odd"].verdict == "not-affected"


def test_zfs_real_output_pasted_columns() -> None:
    c = by_kind(status("hidden", "no-device"), ev(zfs_crypto=(0, out("zfs/buetow-f3s-14-zroot-bhyve-two-datasets.txt"))))["zfs"]
    assert [i.name for i in c.items] == ["zroot/bhyve", "zroot/bhyve/rocky"] and c.verdict == "software"


def test_zfs_absent_command_and_not_gathered() -> None:
    assert by_kind(status("aesni", "attached"), ev(zfs_crypto=(127, b"")))["zfs"].present is False
    c = by_kind(status("aesni", "attached"), ev())["zfs"]
    assert c.present is None and c.verdict == "unknown" and "not gathered" in (c.reason or "")


SETKEY_GCM = (0, out("setkey/bsdrp-ipsec-lab-aes-gcm-16-static.txt"))


@pytest.mark.parametrize("cpu,driver,verdict", [
    ("aesni", "attached", "accelerated"), ("aesni", "not-loaded", "software"),
    ("hidden", "not-loaded", "software"), ("absent", "no-device", "software"),
])
def test_ipsec_gcm_sas(cpu: str, driver: str, verdict: str) -> None:
    c = by_kind(status(cpu, driver, 12), ev(setkey_sad=SETKEY_GCM))["ipsec"]
    assert c.present is True and c.verdict == verdict
    assert [(i.name, i.algorithm, i.cipher) for i in c.items] == [("4 ESP SAs", "aes-gcm-16", "AES-GCM")]


def test_ipsec_not_root_is_unknown_and_says_so() -> None:
    s = status("aesni", "not-loaded", 12)
    e = ev(sysctl_ipsec=(0, b"net.inet.ipsec.def_policy: 1\n"), setkey_sad=(1, out("setkey/derived-not-root.txt")))
    c = by_kind(s, e)["ipsec"]
    assert c.present is True and c.verdict == "unknown" and "root" in (c.reason or "")
    assert [f.id for f in findings(s)] == ["ipsec-sas-unreadable"]


def test_ipsec_not_in_kernel() -> None:
    e = ev(sysctl_ipsec=(1, b"sysctl: unknown oid 'net.inet.ipsec.def_policy'\n"),
           setkey_sad=(1, b"pfkey_open: Protocol not supported\n"))
    c = by_kind(status("aesni", "attached"), e)["ipsec"]
    assert c.present is False and c.verdict == "not-in-use"


def test_ipsec_old_rijndael_with_md5_runs_in_software_even_with_aesni() -> None:
    e = ev(setkey_sad=(0, out("setkey/lkml-2003-ipsec-tools-rijndael-hmac-md5-ipcomp.txt")))
    c = by_kind(status("aesni", "attached+sha"), e)["ipsec"]
    assert [(i.name, i.cipher, i.verdict) for i in c.items] == [("2 ESP SAs", "AES-CBC", "software")]
    assert "hmac-md5" in (c.items[0].why or "")


def test_ipsec_unnamed_algorithm_is_unknown() -> None:
    e = ev(setkey_sad=(0, out("setkey/derived-probe-filtered-cbc-and-unnamed.txt")))
    c = by_kind(status("aesni", "attached+sha"), e)["ipsec"]
    assert [i.verdict for i in c.items] == ["accelerated", "unknown"] and c.verdict == "unknown"


KTLS = (0, out("ktls/derived-14-sysctl-kern-ipc-tls-sw-ocf.txt"))


@pytest.mark.parametrize("cpu,driver,verdict", [
    ("aesni", "attached", "accelerated"), ("hidden", "no-device", "software"), ("absent", "no-device", "software"),
])
def test_ktls_software_sessions(cpu: str, driver: str, verdict: str) -> None:
    c = by_kind(status(cpu, driver, 14), ev(sysctl_ktls=KTLS))["ktls"]
    assert c.present is True and c.verdict == verdict
    assert [(i.name, i.cipher) for i in c.items] == [("3 software (OCF) sessions", "AES-GCM")]


def test_ktls_nic_sessions_do_not_need_the_driver() -> None:
    c = by_kind(status("absent", "no-device"), ev(sysctl_ktls=(0, out("ktls/derived-13-disabled-ifnet.txt"))))["ktls"]
    assert [(i.verdict, i.by) for i in c.items] == [("accelerated", "ifnet")]


def test_ktls_absent_kernel_and_enabled_without_sessions() -> None:
    c = by_kind(status("aesni", "not-loaded", 12), ev(sysctl_ktls=(1, out("ktls/derived-no-ktls-kernel.txt"))))["ktls"]
    assert c.present is False
    c = by_kind(status("hidden", "no-device", 15), ev(sysctl_ktls=(0, b"kern.ipc.tls.enable: 1\n")))["ktls"]
    # the sw session counters were not shown: unknown, not "no session"
    assert c.present is True and c.verdict == "unknown" and "would be software" in c.detail
    zero = b"kern.ipc.tls.enable: 1\nkern.ipc.tls.sw.cbc: 0\nkern.ipc.tls.sw.gcm: 0\nkern.ipc.tls.sw.chacha20: 0\n"
    c = by_kind(status("hidden", "no-device", 15), ev(sysctl_ktls=(0, zero)))["ktls"]
    assert c.present is True and c.verdict == "not-in-use" and "no session now" in c.detail


TUNNELS = (0, out("tunnels/derived-14-ovpn-and-wg.txt"))


def test_tunnels_wireguard_never_affected_ovpn_cipher_unknown() -> None:
    for cpu, driver in (("aesni", "attached"), ("hidden", "no-device"), ("absent", "no-device")):
        k = by_kind(status(cpu, driver, 14), ev(tunnel_groups=TUNNELS))
        assert k["wireguard"].present is True and k["wireguard"].verdict == "not-affected"
        o = k["ovpn-dco"]
        assert o.present is True and o.verdict == "unknown" and [i.name for i in o.items] == ["ovpn0"]
        assert ("accelerated by aesni" if cpu == "aesni" else "software") in (o.items[0].why or "")


def test_tunnels_none_on_13() -> None:
    k = by_kind(status("aesni", "attached", 13), ev(tunnel_groups=(0, out("tunnels/derived-13-none.txt"))))
    assert k["ovpn-dco"].present is False and k["wireguard"].present is False


def test_geli_from_status() -> None:
    s = status("aesni", "attached")
    s.geli = [GeliInfo("ada0p2.eli", "AES-XTS", 256, "accelerated software", True, False),
              GeliInfo("ada1p1.eli", "AES-XTS", 256, "software", False, True)]
    c = by_kind(s, ev())["geli"]
    assert [i.verdict for i in c.items] == ["accelerated", "software"] and c.verdict == "software"
    assert findings(s) == []  # GELI has its own findings (geli-software)


def test_findings_name_what_is_affected_now() -> None:
    s = status("aesni", "not-loaded", 12)
    by_kind(s, ev(setkey_sad=SETKEY_GCM, zfs_crypto=ZFS[1], sysctl_ktls=KTLS, tunnel_groups=TUNNELS))
    f = findings(s)
    assert [x.id for x in f] == ["consumer-aes-software"] and f[0].severity == "warning"
    assert "IPsec: 4 ESP SAs aes-gcm-16" in f[0].message and "zroot/enc" in f[0].message
    assert "tank/vol0" not in f[0].message  # locked: not affected now
    assert "bsdcrypt enable --persist" in f[0].remedy
    assert in_use_with_aes(s)[0].startswith("ZFS encryption (zroot/enc")


def test_findings_on_a_vm_hiding_aesni_say_passthrough_and_chacha() -> None:
    s = status("hidden", "no-device", 14)
    by_kind(s, ev(setkey_sad=SETKEY_GCM))
    f = findings(s)[0]
    assert "hides AES-NI" in f.message and "pass AES-NI through" in f.remedy and "ChaCha20-Poly1305" in f.remedy


def test_nothing_affected_no_finding() -> None:
    s = status("aesni", "attached")
    by_kind(s, ev(setkey_sad=SETKEY_GCM, zfs_crypto=ZFS[1], sysctl_ktls=KTLS, tunnel_groups=TUNNELS))
    assert findings(s) == []


@pytest.mark.parametrize("text", [b"internal error: failed to initialize ZFS library\n",
                                  b"cannot open 'tank': dataset does not exist\n"])
def test_zfs_error_in_probe_output_is_unknown_not_no_dataset(text: bytes) -> None:
    # the probe keeps only encrypted datasets' lines and exits 0 whatever zfs did: another line is an error
    c = by_kind(status("aesni", "attached"), ev(zfs_crypto=(0, text)))["zfs"]
    assert (c.present, c.verdict) == (None, "unknown") and text.decode().strip() in (c.reason or "")
    # nothing printed: no encrypted dataset (OpenZFS prints nothing when no pool is imported)
    assert by_kind(status("aesni", "attached"), ev(zfs_crypto=(0, b"")))["zfs"].present is False


# --- lists the probe cuts (`head -n`): a full list is "at least", and what the rest may be stays open -----
def _zfs_lines(datasets: int) -> bytes:
    # the probe's `zfs get -H -o name,property,value` lines of encrypted datasets (zfs(8): tab-separated)
    return b"".join(b"pool/ds%d\tencryption\taes-256-gcm\npool/ds%d\tkeystatus\tavailable\n" % (i, i)
                    for i in range(datasets))


@pytest.mark.parametrize("driver,shown", [("attached", "accelerated"), ("not-loaded", "software")])
def test_a_zfs_list_the_probe_cut_is_at_least_and_never_better_than_unknown(driver: str, shown: str) -> None:
    from bsdcrypt.probe import ZFS_MAX_LINES

    full = by_kind(status("aesni", driver), ev(zfs_crypto=(0, _zfs_lines(ZFS_MAX_LINES // 2))))["zfs"]
    assert full.detail.startswith(f"at least {ZFS_MAX_LINES // 2} encrypted dataset(s)")  # type: ignore[attr-defined]
    assert "there may be more" in (full.reason or "")  # type: ignore[attr-defined]
    # all shown accelerated: the rest may not be, so unknown; software shown stays software (already the worst)
    assert full.verdict == ("unknown" if shown == "accelerated" else "software")  # type: ignore[attr-defined]
    short = by_kind(status("aesni", driver), ev(zfs_crypto=(0, _zfs_lines(ZFS_MAX_LINES // 2 - 1))))["zfs"]
    assert short.verdict == shown and short.reason is None  # type: ignore[attr-defined]
    assert short.detail.startswith(f"{ZFS_MAX_LINES // 2 - 1} encrypted")  # type: ignore[attr-defined]


def test_a_setkey_list_the_probe_cut_is_at_least() -> None:
    from bsdcrypt.probe import SETKEY_MAX_LINES

    sa = b"\tesp mode=tunnel\n\tE: aes-gcm-16\n\tstate=mature\n"  # the probe's 3 lines of an AEAD SA
    sas = SETKEY_MAX_LINES // 3 + 1
    ipsec = by_kind(status("aesni", "attached"), ev(setkey_sad=(0, (sa * sas))))["ipsec"]
    assert ipsec.detail == f"at least {sas} SA(s)" and ipsec.verdict == "unknown"  # type: ignore[attr-defined]
    ipsec = by_kind(status("aesni", "attached"), ev(setkey_sad=(0, sa * 10)))["ipsec"]
    assert ipsec.detail == "10 SA(s)" and ipsec.verdict == "accelerated"  # type: ignore[attr-defined]
