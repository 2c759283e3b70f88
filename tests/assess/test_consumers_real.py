"""Each consumer's verdict against each driver state and CPU (AES-NI shown, hidden by a hypervisor,
absent), with every REAL published output of fixtures/parsers/{zfs,setkey,ipsec,ktls,ifconfig} as
input (each file's header names its source). The derived fixtures are table-tested in
tests/assess/test_consumers.py; this file keeps to what real hosts printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from assess.test_consumers import CPUS, DRIVERS
from bsdcrypt.assess.consumers import consumers, findings
from bsdcrypt.probe import Evidence, Step
from bsdcrypt.status import ConsumerInfo, OSInfo, Status

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "parsers"
# (cpu, driver) -> the verdict of an AES-GCM session now, and the driver that takes it. The reasoning:
# an attached driver offering AES-GCM takes the session (aesni/armv8crypto); the CPU shows AES-NI but
# aesni is not loaded or found no device: cryptosoft (software); a VM hiding AES-NI or a CPU without it:
# software whatever the driver state; the driver state not known: unknown (never "no").
SITUATIONS = [
    ("aesni", "attached", "accelerated", "aesni"),
    ("aesni", "not-loaded", "software", None),
    ("aesni", "no-device", "software", None),
    ("aesni", "unknown", "unknown", None),
    ("hidden", "not-loaded", "software", None),
    ("hidden", "no-device", "software", None),
    ("absent", "no-device", "software", None),
    ("aesni", "armv8", "accelerated", "armv8crypto"),
]


def real(fixture: str) -> bytes:
    header, body = (FIX / fixture).read_text().split("# ---\n", 1)
    assert "derived" not in fixture and "derived from" not in header  # only what real hosts printed here
    return body.encode()


def status(cpu: str, driver: str, major: int) -> Status:
    s = Status(host="h", source="t")
    s.os = OSInfo(name="FreeBSD", major=major, minor=0, release=f"{major}.0-RELEASE", arch="amd64")
    s.cpu = CPUS[cpu]
    s.driver = DRIVERS[driver]
    return s


def kinds(s: Status, **steps: tuple[int, bytes]) -> dict[str, ConsumerInfo]:
    s.consumers = consumers(Evidence({k: Step(rc, out) for k, (rc, out) in steps.items()}), s)
    return {c.kind: c for c in s.consumers}


# --- IPsec: real `setkey -D` (BSDRP lab, FreeBSD-based, two captures) ---------------------------------
SETKEY = {
    "setkey/bsdrp-ipsec-lab-aes-gcm-16-static.txt": "4 ESP SAs",
    "setkey/bsdrp-vpn-lab-vti-aes-gcm-16-tunnel-reqid.txt": "2 ESP SAs",
}


@pytest.mark.parametrize("fixture", sorted(SETKEY))
@pytest.mark.parametrize("cpu,driver,verdict,by", SITUATIONS)
def test_ipsec_aes_gcm_sas(fixture: str, cpu: str, driver: str, verdict: str, by: str | None) -> None:
    s = status(cpu, driver, 12)
    c = kinds(s, setkey_sad=(0, real(fixture)))["ipsec"]
    assert c.present is True and c.verdict == verdict
    assert [(i.name, i.algorithm, i.cipher, i.verdict, i.by) for i in c.items] == [
        (SETKEY[fixture], "aes-gcm-16", "AES-GCM", verdict, by)]
    assert [f.id for f in findings(s)] == (["consumer-aes-software"] if verdict == "software" else [])


def test_ipsec_old_rijndael_sas_of_a_linux_kame_setkey_read_like_freebsds() -> None:
    # the only real rijndael-cbc dump found is Linux ipsec-tools (KAME's setkey, FreeBSD's format)
    c = kinds(status("aesni", "attached", 12),
              setkey_sad=(0, real("setkey/lkml-2003-ipsec-tools-rijndael-hmac-md5-ipcomp.txt")))["ipsec"]
    assert [(i.name, i.cipher, i.verdict) for i in c.items] == [("2 ESP SAs", "AES-CBC", "software")]


# --- IPsec: the real `sysctl -a | grep ipsec` (a pfSense/m0n0wall firewall, 2008) -----------------------
IPSEC_SYSCTL = (0, FIX.joinpath("ipsec/docunext-2008-pfsense-sysctl-a-grep-ipsec.txt").read_text()
                .split("# ---\n", 1)[1].split("\n", 1)[1].encode())  # without the joined prompt line


@pytest.mark.parametrize("cpu,driver", [(c, d) for c, d, _, _ in SITUATIONS])
def test_ipsec_in_kernel_from_the_real_sysctl_sas_not_read(cpu: str, driver: str) -> None:
    s = status(cpu, driver, 12)
    c = kinds(s, sysctl_ipsec=IPSEC_SYSCTL)["ipsec"]
    # def_policy shows netipsec in the kernel; without setkey -D its SAs (and their ciphers) are unknown
    assert c.present is True and c.verdict == "unknown" and "its SAs were not read" in c.detail
    assert findings(s) == []
    s = status(cpu, driver, 12)
    c = kinds(s, sysctl_ipsec=IPSEC_SYSCTL, setkey_sad=(1, b"pfkey_open: Operation not permitted\n"))["ipsec"]
    assert c.present is True and c.verdict == "unknown" and "root" in (c.reason or "")
    assert [f.id for f in findings(s)] == ["ipsec-sas-unreadable"]


def test_ipsec_real_sysctl_and_real_sas_together() -> None:
    s = status("hidden", "no-device", 14)
    c = kinds(s, sysctl_ipsec=IPSEC_SYSCTL,
              setkey_sad=(0, real("setkey/bsdrp-vpn-lab-vti-aes-gcm-16-tunnel-reqid.txt")))["ipsec"]
    assert c.present is True and c.verdict == "software" and "hides AES-NI" in (c.items[0].why or "")


# --- ZFS: real `zfs get` (FreeBSD 14.x, Paul Buetow's f3s series: three captures of one host) ----------
ZFS = {
    "zfs/buetow-f3s-14-zdata-enc-get-all-grep.txt": ["zdata/enc"],
    "zfs/buetow-f3s-14-zroot-bhyve-two-datasets.txt": ["zroot/bhyve", "zroot/bhyve/rocky"],
}


@pytest.mark.parametrize("fixture", sorted(ZFS))
@pytest.mark.parametrize("cpu,driver,verdict,by", SITUATIONS)
def test_zfs_aes_256_gcm_datasets(fixture: str, cpu: str, driver: str, verdict: str, by: str | None) -> None:
    c = kinds(status(cpu, driver, 14), zfs_crypto=(0, real(fixture)))["zfs"]
    assert c.present is True and c.verdict == verdict
    assert [(i.name, i.algorithm, i.cipher, i.state, i.verdict, i.by) for i in c.items] == [
        (n, "aes-256-gcm", "AES-GCM", "available", verdict, by) for n in ZFS[fixture]]


def test_zfs_keystatus_alone_pasted_is_unknown_not_no() -> None:
    # a pasted `zfs get keystatus DATASET`: a key (available) means the dataset is encrypted, but its cipher
    # is not shown; never "no encrypted dataset", never a verdict on a cipher nobody saw
    from bsdcrypt.collect.paste import evidence_from_paste

    dmesg = (FIX / "dmesg/bhyve-guest-12.2-e3-1225v5.txt").read_text().split("# ---\n", 1)[1]
    ev = evidence_from_paste(dmesg + real("zfs/buetow-f3s-14-keystatus-with-header.txt").decode())
    assert ev is not None
    for cpu, driver, _, _ in SITUATIONS:
        s = status(cpu, driver, 14)
        s.consumers = consumers(ev, s)
        zfs = {c.kind: c for c in s.consumers}["zfs"]
        assert zfs.present is not False and zfs.verdict == "unknown"


# --- kernel TLS: the one real output, `sysctl kern.ipc.tls.enable=1` (FreeBSD 14/15) --------------------
@pytest.mark.parametrize("cpu,driver,verdict,by", SITUATIONS)
def test_ktls_enabled_without_sessions_says_what_sessions_would_get(cpu: str, driver: str, verdict: str,
                                                                     by: str | None) -> None:
    s = status(cpu, driver, 14)
    c = kinds(s, sysctl_ktls=(0, real("ktls/moeller-nbd-ktls-enable-set.txt")))["ktls"]
    # enable=1 shown, kern.ipc.tls.sw.* not: whether sessions run now is unknown (assess/consumers._ktls)
    assert c.present is True and c.verdict == "unknown" and c.items == []
    assert f"AES-GCM sessions would be {verdict}" in c.detail and (by is None or f"by {by}" in c.detail)
    assert findings(s) == []  # nothing runs in software now


@pytest.mark.parametrize("cpu,driver", [(c, d) for c, d, _, _ in SITUATIONS])
def test_ktls_nic_lines_only_leave_software_sessions_unknown(cpu: str, driver: str) -> None:
    # OPNsense 26.7 (FreeBSD 15.1): only kern.ipc.tls.ifnet.{gcm,chacha20}: 0 were quoted
    s = status(cpu, driver, 15)
    c = kinds(s, sysctl_ktls=(0, real("ktls/opnsense-src296-26.7-15.1-ifnet-lines-quoted.txt")))["ktls"]
    assert c.present is not False and c.verdict == "unknown" and c.items == [] and findings(s) == []


# --- tunnels: real `ifconfig` outputs (WireGuard; OpenVPN's tun(4) without DCO) via a paste ------------
def test_real_tunnel_interfaces_pasted_under_each_driver_state() -> None:
    from bsdcrypt.collect.paste import evidence_from_paste

    wg = real("ifconfig/bsdrp-vpn-lab-14-wg0-groups-wg.txt").decode()
    tun = real("ifconfig/openvpn-issue357-13.2-tun0-groups-tun-no-dco.txt").decode()
    ovpns1 = real("ifconfig/opnsense-core5588-ovpns1-groups-tun-openvpn.txt").decode()  # OpenVPN over tun
    tun786 = real("ifconfig/openvpn-issue786-tun0-created-groups-tun.txt").decode()
    ipsec0 = real("ifconfig/bsdrp-vpn-lab-vti-ipsec0-groups-ipsec.txt").decode()  # in no tunnel group we read
    dmesg = (FIX / "dmesg/bhyve-guest-12.2-e3-1225v5.txt").read_text().split("# ---\n", 1)[1]
    ev = evidence_from_paste(dmesg + wg + tun + ovpns1 + tun786 + ipsec0)
    assert ev is not None
    for cpu, driver, _, _ in SITUATIONS:
        s = status(cpu, driver, 14)
        s.consumers = consumers(ev, s)
        k = {c.kind: c for c in s.consumers}
        assert k["wireguard"].present is True and k["wireguard"].verdict == "not-affected"
        assert [i.name for i in k["wireguard"].items] == ["wg0"]
        # only named interfaces were shown (ovpns1 is OpenVPN over tun, never counted as DCO): whether some
        # other one is a DCO interface is not known on a 14.x host
        assert k["ovpn-dco"].present is None and k["ovpn-dco"].verdict == "unknown" and k["ovpn-dco"].items == []


# --- OpenVPN DCO: interface names from real DCO logs, in the group listing ifconfig prints --------------
@pytest.mark.parametrize("cpu,driver,verdict,by", SITUATIONS)
def test_dco_interface_named_tun7_on_freebsd_is_dco_by_its_group(cpu: str, driver: str, verdict: str,
                                                                 by: str | None) -> None:
    # OpenVPN names a DCO interface tunN on FreeBSD (issue 748's log); a tun(4) interface would be in group
    # tun, never openvpn (issue 357's real ifconfig), and plain FreeBSD puts nothing else there: DCO
    s = status(cpu, driver, 14)
    c = kinds(s, tunnel_groups=(0, real("tunnels/composite-openvpn-issue748-dco-tun7.txt")))["ovpn-dco"]
    assert c.present is True and [i.name for i in c.items] == ["tun7"]
    # the data cipher is not shown: unknown, and the item says what AES-GCM would get here
    assert c.verdict == "unknown" and c.items[0].verdict == "unknown"
    assert f"if AES-GCM: {verdict}" in (c.items[0].why or "")
    if by:
        assert f"by {by}" in (c.items[0].why or "")


@pytest.mark.parametrize("cpu,driver", [(c, d) for c, d, _, _ in SITUATIONS])
def test_dco_ovpns2_on_opnsense_without_tun_and_tap_groups_stays_open(cpu: str, driver: str) -> None:
    # OPNsense named its DCO interface ovpns2 (core#10481's log), and its tun(4) ones are in group
    # openvpn too (core#5588): with only the openvpn group listed, both fit; the tun/tap listing settles it
    s = status(cpu, driver, 14)
    s.os.variant = "opnsense"
    c = kinds(s, tunnel_groups=(0, real("tunnels/composite-opnsense-core10481-dco-ovpns2.txt")))["ovpn-dco"]
    assert c.present is None and c.verdict == "unknown" and [i.name for i in c.items] == ["ovpns2"]
    assert "ifconfig -g tun" in (c.reason or "")


def test_ipsec_reflowed_kame_listing_without_def_policy_is_never_no() -> None:
    # a 4.x-6.x era how-to's `sysctl net.inet.ipsec`: entries joined by the author, no def_policy line (the
    # leaf the probe asks): IPsec's presence stays unknown, never "not in the kernel"
    text = (FIX / "ipsec/de-howto-kame-sysctl-net-inet-ipsec-reflowed.txt").read_text().split("# ---\n", 1)[1]
    for cpu, driver, _, _ in SITUATIONS:
        c = kinds(status(cpu, driver, 6), sysctl_ipsec=(0, text.encode()))["ipsec"]
        assert c.present is not False and c.verdict == "unknown"


REAL_INPUTS = {
    "setkey/bsdrp-ipsec-lab-aes-gcm-16-static.txt", "setkey/bsdrp-vpn-lab-vti-aes-gcm-16-tunnel-reqid.txt",
    "setkey/lkml-2003-ipsec-tools-rijndael-hmac-md5-ipcomp.txt",
    "ipsec/docunext-2008-pfsense-sysctl-a-grep-ipsec.txt", "ipsec/de-howto-kame-sysctl-net-inet-ipsec-reflowed.txt",
    "zfs/buetow-f3s-14-zdata-enc-get-all-grep.txt", "zfs/buetow-f3s-14-zroot-bhyve-two-datasets.txt",
    "zfs/buetow-f3s-14-keystatus-with-header.txt",
    "ktls/moeller-nbd-ktls-enable-set.txt", "ktls/opnsense-src296-26.7-15.1-ifnet-lines-quoted.txt",
    "ifconfig/bsdrp-vpn-lab-14-wg0-groups-wg.txt", "ifconfig/bsdrp-vpn-lab-vti-ipsec0-groups-ipsec.txt",
    "ifconfig/openvpn-issue357-13.2-tun0-groups-tun-no-dco.txt", "ifconfig/openvpn-issue786-tun0-created-groups-tun.txt",
    "ifconfig/opnsense-core5588-ovpns1-groups-tun-openvpn.txt",
    "tunnels/composite-openvpn-issue748-dco-tun7.txt", "tunnels/composite-opnsense-core10481-dco-ovpns2.txt",
}


def test_every_real_consumer_output_is_an_input_here() -> None:
    # a real output added to the consumers' fixtures must join the verdict tables above
    found = {f"{p.parent.name}/{p.name}" for cat in ("setkey", "ipsec", "zfs", "ktls", "ifconfig", "tunnels")
             for p in (FIX / cat).glob("*.txt") if not p.name.startswith("derived-")}
    assert found == REAL_INPUTS
    source = Path(__file__).read_text()
    assert all(source.count(name.split("/")[1]) >= 2 for name in REAL_INPUTS)  # listed here and read by a test
