"""Table tests of the kernel-consumer parsers (zfs get, setkey -D, sysctl kern.ipc.tls and
net.inet.ipsec, interface groups, ifconfig's groups: lines) on the fixtures in
fixtures/parsers/{zfs,setkey,ktls,ipsec,tunnels,ifconfig} (real outputs and outputs derived from
FreeBSD's and OpenZFS's printing code; each file's header names its source)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.facts import IpsecSA, KtlsState, SetkeyDump, ZfsDataset
from bsdcrypt.parsers.ifgroup import members, parse_groups, parse_ifconfig
from bsdcrypt.parsers.ktls import parse_ktls
from bsdcrypt.parsers.setkey import esp_algorithm, needs_root, no_pfkey, parse_setkey_dump
from bsdcrypt.parsers.sysctl import parse_sysctl
from bsdcrypt.parsers.zfs import is_encrypted, parse_zfs_get

from ._load import load, names

Z = ZfsDataset
ZFS: dict[str, list[ZfsDataset]] = {
    "buetow-f3s-14-zdata-enc-get-all-grep.txt": [Z("zdata/enc", "aes-256-gcm", "available")],
    "buetow-f3s-14-zroot-bhyve-two-datasets.txt": [
        Z("zroot/bhyve", "aes-256-gcm", "available"), Z("zroot/bhyve/rocky", "aes-256-gcm", "available")],
    "buetow-f3s-14-keystatus-with-header.txt": [Z("zdata/enc/nfsdata", None, "available")],
    "derived-zfs-get-H-probe.txt": [
        Z("zroot", "off", None), Z("zroot/enc", "aes-256-gcm", "available"),
        Z("zroot/enc/home", "aes-256-gcm", "available"), Z("tank/vol0", "aes-128-ccm", "unavailable"),
        Z("tank/odd", "chacha20-poly1305", "available")],
    "derived-zfs-not-present.txt": [],
}


def test_every_zfs_fixture_has_a_case() -> None:
    assert set(names("zfs")) == set(ZFS)


@pytest.mark.parametrize("name", sorted(ZFS))
def test_zfs(name: str) -> None:
    assert parse_zfs_get(load("zfs", name)) == ZFS[name]


def test_zfs_encrypted_reads_off_as_no_and_a_missing_line_as_unknown() -> None:
    assert [is_encrypted(d) for d in ZFS["derived-zfs-get-H-probe.txt"]] == [False, True, True, True, True]
    assert is_encrypted(ZFS["buetow-f3s-14-keystatus-with-header.txt"][0]) is None


SA = IpsecSA
GCM = SA("esp", "any", "aes-gcm-16", None, "mature")
GCM_TUNNEL = SA("esp", "tunnel", "aes-gcm-16", None, "mature")
SETKEY: dict[str, SetkeyDump] = {
    "bsdrp-ipsec-lab-aes-gcm-16-static.txt": SetkeyDump(True, (GCM, GCM, GCM, GCM)),
    # the same lab's route-based (VTI) SAs: mode=tunnel, a reqid, counters moving
    "bsdrp-vpn-lab-vti-aes-gcm-16-tunnel-reqid.txt": SetkeyDump(True, (GCM_TUNNEL, GCM_TUNNEL)),
    "lkml-2003-ipsec-tools-rijndael-hmac-md5-ipcomp.txt": SetkeyDump(True, (
        SA("esp", "tunnel", "rijndael-cbc", "hmac-md5", "dying"),
        SA("esp", "tunnel", "rijndael-cbc", "hmac-md5", "dying"),
        SA("ipcomp", "tunnel", None, None, "larval"))),
    "derived-not-root.txt": SetkeyDump(False, (), "Operation not permitted"),
    "derived-no-sad-entries.txt": SetkeyDump(True, ()),
    "derived-probe-filtered-cbc-and-unnamed.txt": SetkeyDump(True, (
        SA("esp", "tunnel", "aes-cbc", "hmac-sha2-256", "mature"), SA("esp", "transport", "99", None, "mature"))),
    # 14.0+ setkey names ChaCha20-Poly1305 (pfkey_dump.c @9f8f3a8e); the key's ninth hex group wraps
    "derived-14-chacha20-poly1305-aead.txt": SetkeyDump(True, (
        SA("esp", "transport", "chacha20-poly1305", None, "mature"),
        SA("esp", "transport", "chacha20-poly1305", None, "mature"))),
    # 12.x setkey has no name for SADB_X_EALG_AESGMAC: it prints the number
    "derived-12-aes-gmac-printed-as-number.txt": SetkeyDump(True, (SA("esp", "transport", "23", None, "mature"),)),
}


def test_every_setkey_fixture_has_a_case() -> None:
    assert set(names("setkey")) == set(SETKEY)


@pytest.mark.parametrize("name", sorted(SETKEY))
def test_setkey(name: str) -> None:
    assert parse_setkey_dump(load("setkey", name)) == SETKEY[name]


def test_setkey_errors_say_why() -> None:
    assert needs_root(SETKEY["derived-not-root.txt"])
    nofamily = parse_setkey_dump("pfkey_open: Address family not supported by protocol family\n")
    assert nofamily.readable is False and no_pfkey(nofamily) and not needs_root(nofamily)
    assert parse_setkey_dump("") == SetkeyDump()


def test_setkey_never_keeps_key_material() -> None:
    for name in ("bsdrp-ipsec-lab-aes-gcm-16-static.txt", "bsdrp-vpn-lab-vti-aes-gcm-16-tunnel-reqid.txt"):
        assert "31323334" not in repr(parse_setkey_dump(load("setkey", name)))
    for name in ("derived-14-chacha20-poly1305-aead.txt", "derived-12-aes-gmac-printed-as-number.txt"):
        dump = parse_setkey_dump(load("setkey", name))
        assert "00010203" not in repr(dump) and "10111213" not in repr(dump)


@pytest.mark.parametrize(("printed", "name"), [
    ("chacha20-poly1305", "chacha20-poly1305"), ("aes-gcm-16", "aes-gcm-16"), ("rijndael-cbc", "rijndael-cbc"),
    ("23", "aes-gmac"),       # SADB_X_EALG_AESGMAC: no pfkey_dump.c version names it
    ("12", "aes-cbc"), ("20", "aes-gcm-16"), ("13", "aes-ctr"), ("11", "null"), ("3", "3des-cbc"),
    ("99", None), ("0", None), ("250", None),  # values bsdcrypt cannot name stay unnamed
    (None, None),
])
def test_esp_algorithm_names_what_setkey_printed(printed: str | None, name: str | None) -> None:
    assert esp_algorithm(printed) == name


# `sysctl net.inet.ipsec...` is read with the sysctl parser; def_policy (sys/netipsec) tells IPsec is in
# the kernel. The real listings: one through `grep`, its first line joined to kern.malloc rows by the page;
# one reflowed by its author (entries joined on a line: parse_sysctl splits them) and without def_policy.
IPSEC: dict[str, tuple[int, dict[str, str]]] = {
    "docunext-2008-pfsense-sysctl-a-grep-ipsec.txt": (12, {
        "net.inet.ipsec.def_policy": "1", "net.inet.ipsec.crypto_support": "0", "net.inet.ipsec.esp_randpad": "-1",
        "net.inet6.ipsec6.def_policy": "1"}),
    "de-howto-kame-sysctl-net-inet-ipsec-reflowed.txt": (10, {
        "net.inet.ipsec.esp_trans_deflev": "1", "net.inet.ipsec.esp_net_deflev": "1", "net.inet.ipsec.ah_offsetmask": "0",
        "net.inet.ipsec.dfbit": "0", "net.inet.ipsec.ecn": "0", "net.inet.ipsec.debug": "0",
        "net.inet.ipsec.esp_randpad": "-1"}),
}


def test_every_ipsec_fixture_has_a_case() -> None:
    assert set(names("ipsec")) == set(IPSEC)


@pytest.mark.parametrize("name", sorted(IPSEC))
def test_ipsec_sysctl(name: str) -> None:
    count, expected = IPSEC[name]
    got = parse_sysctl(load("ipsec", name))
    assert {k: got.get(k) for k in expected} == expected
    assert sum(1 for k in got if k.startswith("net.inet.ipsec.")) == count
    assert not any("ipsecpolicy" in k or "ipsecpolicy" in v for k, v in got.items())  # the joined junk line


KTLS: dict[str, KtlsState] = {
    "moeller-nbd-ktls-enable-set.txt": KtlsState(present=True, enabled=True),
    "derived-14-sysctl-kern-ipc-tls-sw-ocf.txt": KtlsState(
        present=True, enabled=True,
        sessions={"sw": {"cbc": 0, "gcm": 3, "chacha20": 0}, "ifnet": {"cbc": 0, "gcm": 0, "chacha20": 0}},
        ocf={"retries": 0, "separate_output": 18, "inplace": 4022, "tls13_chacha20_crypts": 0,
             "tls13_gcm_crypts": 4040, "tls12_chacha20_crypts": 0, "tls12_gcm_crypts": 0,
             "tls11_cbc_crypts": 0, "tls10_cbc_crypts": 0},
        active=3),
    "derived-13-disabled-ifnet.txt": KtlsState(
        present=True, enabled=False,
        sessions={"sw": {"cbc": 0, "gcm": 0, "chacha20": 0}, "ifnet": {"cbc": 0, "gcm": 2, "chacha20": 0}},
        active=2),
    "derived-no-ktls-kernel.txt": KtlsState(present=False),
    # two real lines quoted in an issue: the NIC path only; enable and the software path not shown
    "opnsense-src296-26.7-15.1-ifnet-lines-quoted.txt": KtlsState(
        present=True, enabled=None, sessions={"ifnet": {"gcm": 0, "chacha20": 0}}),
}


def test_every_ktls_fixture_has_a_case() -> None:
    assert set(names("ktls")) == set(KTLS)


@pytest.mark.parametrize("name", sorted(KTLS))
def test_ktls(name: str) -> None:
    assert parse_ktls(load("ktls", name)) == KTLS[name]


def test_ktls_without_any_line_is_unknown() -> None:
    assert parse_ktls("hw.model: x\n") == KtlsState()


GROUPS = {
    "derived-14-ovpn-and-wg.txt": {"openvpn": ["ovpn0"], "wg": ["wg0"]},
    "derived-13-none.txt": {"openvpn": [], "wg": []},
    "composite-openvpn-issue748-dco-tun7.txt": {"openvpn": ["tun7"]},
    "composite-opnsense-core10481-dco-ovpns2.txt": {"openvpn": ["ovpns2"]},
}


def test_every_tunnels_fixture_has_a_case() -> None:
    assert set(names("tunnels")) == set(GROUPS)


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_groups(name: str) -> None:
    assert parse_groups(load("tunnels", name)) == GROUPS[name]


# `ifconfig [IFACE]` blocks -> {interface: groups}: real FreeBSD outputs of a WireGuard tunnel, an if_ipsec
# VTI and OpenVPN's tun(4) interface without DCO (group tun, never openvpn)
IFCONFIG = {
    "bsdrp-vpn-lab-14-wg0-groups-wg.txt": {"wg0": ["wg"]},
    "bsdrp-vpn-lab-vti-ipsec0-groups-ipsec.txt": {"ipsec0": ["ipsec"]},
    "openvpn-issue357-13.2-tun0-groups-tun-no-dco.txt": {"tun0": ["tun"]},  # two blocks, one leading space
    "openvpn-issue786-tun0-created-groups-tun.txt": {"tun0": ["tun"]},
    "opnsense-core5588-ovpns1-groups-tun-openvpn.txt": {"ovpns1": ["tun", "openvpn"]},  # OpenVPN over tun
}


def test_every_ifconfig_fixture_has_a_case() -> None:
    assert set(names("ifconfig")) == set(IFCONFIG)


@pytest.mark.parametrize("name", sorted(IFCONFIG))
def test_ifconfig(name: str) -> None:
    got = parse_ifconfig(load("ifconfig", name))
    assert got == IFCONFIG[name]
    # no real output found shows a DCO interface: an openvpn member here is also in tun
    assert all({"tun", "tap"} & set(got[i]) for i in members(got, "openvpn"))


def test_ifconfig_groups_of_several_blocks_and_an_interface_in_none() -> None:
    text = ("lo0: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> metric 0 mtu 16384\n\tgroups: lo\n"
            "em0: flags=8863<UP,BROADCAST,RUNNING,SIMPLEX,MULTICAST> metric 0 mtu 1500\n\tstatus: active\n"
            "ovpns1: flags=8051<UP,POINTOPOINT,RUNNING,MULTICAST> metric 0 mtu 1500\n\tgroups: tun openvpn\n"
            "root@fw:~ # ifconfig wg0\n\tgroups: wg\n")  # a prompt ends the last block: the stray line is no one's
    got = parse_ifconfig(text)
    assert got == {"lo0": ["lo"], "em0": [], "ovpns1": ["tun", "openvpn"]}
    assert members(got, "openvpn") == ["ovpns1"] and members(got, "tun") == ["ovpns1"]


def test_an_error_under_a_group_leaves_it_unknown_and_an_unlisted_group_is_absent() -> None:
    # ifconfig -g prints nothing for a group without members (printgroup exits 0 on ENOENT); any other
    # line is an error (err(1, "SIOCGIFGMEMB"), a shell's "not found"): the group is unknown, never empty
    assert parse_groups("ifconfig: garbage here\n== wg\nifconfig: SIOCGIFGMEMB: Operation not permitted\n") == {}
    assert parse_groups("== openvpn\nsh: ifconfig: not found\n== wg\n\nwg0\n") == {"wg": ["wg0"]}


@pytest.mark.slow
@given(st.text(max_size=400))
def test_the_parsers_never_raise(text: str) -> None:
    parse_zfs_get(text)
    parse_setkey_dump(text)
    parse_ktls(text)
    parse_groups(text)
    parse_ifconfig(text)
