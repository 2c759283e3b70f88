"""`analyze` recognises the consumers' outputs in a paste (issue 27): zfs get (column form, with or
without its header, through grep), setkey -D (prompted or not; the single-space indentation of a mail),
sysctl kern.ipc.tls / net.inet.ipsec lines, ifconfig -g openvpn|wg. The pastes are put together from
the real outputs in fixtures/parsers (each file's header names its source) and a real dmesg.boot."""

from __future__ import annotations

from pathlib import Path

from bsdcrypt.assess import assess
from bsdcrypt.collect.paste import evidence_from_paste, split
from bsdcrypt.probe import StepName

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "parsers"


def body(fixture: str) -> str:
    return (FIX / fixture).read_text().split("# ---\n", 1)[1]


# A real FreeBSD 12.2 bhyve guest (AESNI in Features2, no aesni0: aesni not loaded; 12.x GENERIC lacks it)
DMESG = body("dmesg/bhyve-guest-12.2-e3-1225v5.txt")
SETKEY = body("setkey/bsdrp-ipsec-lab-aes-gcm-16-static.txt")  # starts with its "[root@VM2]~# setkey -D" prompt
ZFS = body("zfs/buetow-f3s-14-zroot-bhyve-two-datasets.txt")  # two prompted `zfs get all | grep` commands


def test_prompted_parts_become_their_steps() -> None:
    text = "$ dmesg\n" + DMESG + SETKEY + ZFS + "% sysctl kern.ipc.tls.enable\nkern.ipc.tls.enable: 1\n" \
        + "% ifconfig -g wg\nwg0\n"
    p = split(text)
    assert p.setkey[:2] == ["2001:db8:34::4 2001:db8:23::2", "        esp mode=any spi=4099(0x00001003) reqid=0(0x00000000)"]
    assert len(p.zfs) == 11 and p.groups == {"wg": ["wg0"]}
    assert {"zfs get", "setkey -D", "ifconfig -g wg"} <= set(p.kinds())
    ev = evidence_from_paste(text)
    assert ev is not None
    for step in (StepName.SETKEY_SAD, StepName.ZFS_CRYPTO, StepName.SYSCTL_KTLS, StepName.TUNNEL_GROUPS):
        assert step in ev.steps, step
    s = assess(ev, "pasted", "paste")
    k = {c.kind: c for c in s.consumers}
    # no kldstat pasted: whether aesni.ko was loaded after boot is unknown, so the SAs' path is too
    assert s.driver.state == "unknown"
    assert k["ipsec"].items[0].name == "4 ESP SAs" and k["ipsec"].verdict == "unknown"
    assert "kldstat -v was not pasted" in (k["ipsec"].items[0].why or "")
    assert k["zfs"].items[0].name == "zroot/bhyve"
    # the openvpn group was not pasted, but a 12.2 kernel has no if_ovpn (FreeBSD 14.0): no DCO
    assert k["wireguard"].present is True and k["ovpn-dco"].present is False
    assert k["ktls"].present is True and k["ktls"].verdict == "unknown"  # kern.ipc.tls.sw.* not pasted


def test_unprompted_setkey_and_zfs_blocks_are_told_by_their_shape() -> None:
    mail = body("setkey/lkml-2003-ipsec-tools-rijndael-hmac-md5-ipcomp.txt")  # single-space indentation
    header = body("zfs/buetow-f3s-14-keystatus-with-header.txt").split("\n", 1)[1]  # without its prompt line
    p = split(DMESG + "\n" + mail + "\n" + header)
    assert p.setkey and p.setkey[0] == "172.16.1.226 172.16.1.247" and len(p.setkey) == 31
    assert p.zfs[:2] == ["NAME               PROPERTY   VALUE        SOURCE",
                         "zdata/enc/nfsdata  keystatus  available    -"]
    assert not any("esp mode=" in line for line in p.dmesg)


def test_a_pasted_setkey_error_and_empty_sad() -> None:
    ev = evidence_from_paste(DMESG + "\n" + body("setkey/derived-not-root.txt"))
    assert ev is not None and ev.steps[StepName.SETKEY_SAD].rc == 1
    ev = evidence_from_paste(DMESG + "\n# setkey -D\nNo SAD entries.\n")
    assert ev is not None and ev.steps[StepName.SETKEY_SAD].out == b"No SAD entries.\n"


def test_a_paste_without_encrypted_datasets_says_unknown_not_no() -> None:
    ev = evidence_from_paste(DMESG + "% zfs get encryption zroot\nNAME   PROPERTY    VALUE  SOURCE\nzroot  encryption  off    default\n")
    assert ev is not None
    zfs = {c.kind: c for c in assess(ev, "p", "paste").consumers}["zfs"]
    assert zfs.present is None and zfs.verdict == "unknown"


def test_consumer_outputs_alone_do_not_make_a_host() -> None:
    assert evidence_from_paste(SETKEY + ZFS) is None


# --- the real outputs found for issue 27's consumers, pasted after a real dmesg.boot ----------------------
def test_real_ipsec_sysctl_through_grep_becomes_the_ipsec_step() -> None:
    # `sysctl -a | grep ipsec` as a pfSense/m0n0wall user posted it (its first line joined to kern.malloc rows)
    ev = evidence_from_paste(DMESG + body("ipsec/docunext-2008-pfsense-sysctl-a-grep-ipsec.txt"))
    assert ev is not None
    st = ev.steps[StepName.SYSCTL_IPSEC]
    assert st.out.startswith(b"net.inet.ipsec.def_policy: 1\n") and b"ipsecpolicy" not in st.out
    assert b"net.inet6.ipsec6" not in st.out  # the probe asks net.inet.ipsec only
    ipsec = {c.kind: c for c in assess(ev, "p", "paste").consumers}["ipsec"]
    assert ipsec.present is True and ipsec.verdict == "unknown"  # in the kernel; its SAs were not pasted


def test_real_vti_setkey_and_ifconfig_pasted_together() -> None:
    vti = body("setkey/bsdrp-vpn-lab-vti-aes-gcm-16-tunnel-reqid.txt")
    ipsec0 = body("ifconfig/bsdrp-vpn-lab-vti-ipsec0-groups-ipsec.txt")
    p = split(DMESG + vti + ipsec0)
    assert "ifconfig" in p.kinds() and len(p.setkey) == 20 and p.ifconfig[0].startswith("ipsec0: flags=")
    ev = evidence_from_paste(DMESG + vti + ipsec0)
    assert ev is not None and StepName.TUNNEL_GROUPS not in ev.steps  # ipsec0 is in no tunnel group we read
    k = {c.kind: c for c in assess(ev, "p", "paste").consumers}
    assert [(i.name, i.cipher) for i in k["ipsec"].items] == [("2 ESP SAs", "AES-GCM")]
    # nothing tells of WireGuard; a 12.2 kernel has no if_ovpn (FreeBSD 14.0), so no DCO
    assert k["ovpn-dco"].present is False and k["wireguard"].present is None


def test_real_ifconfig_of_named_interfaces_tells_members_only() -> None:
    wg0 = body("ifconfig/bsdrp-vpn-lab-14-wg0-groups-wg.txt")
    tun0 = body("ifconfig/openvpn-issue357-13.2-tun0-groups-tun-no-dco.txt")  # 13.2, OpenVPN without DCO
    ev = evidence_from_paste(DMESG + wg0 + tun0)
    # a section means "these and no others": named interfaces give only what they prove present
    assert ev is not None and ev.steps[StepName.TUNNEL_GROUPS].out == b"== wg\nwg0\n"
    k = {c.kind: c for c in assess(ev, "p", "paste").consumers}
    assert k["wireguard"].present is True and k["wireguard"].verdict == "not-affected"
    # the paste's host is a 12.2 guest: no if_ovpn before 14.0, whatever the interfaces (on 14.x the
    # other interfaces, not shown, leave it unknown: tests/assess/test_consumers_real.py)
    assert k["ovpn-dco"].present is False


def test_a_full_ifconfig_listing_tells_an_empty_group() -> None:
    tun0 = body("ifconfig/openvpn-issue786-tun0-created-groups-tun.txt").split("\n", 3)[3]  # the block only
    for cmd in ("ifconfig", "ifconfig -a"):
        ev = evidence_from_paste(DMESG + f"root@host# {cmd}\n" + tun0)
        assert ev is not None and ev.steps[StepName.TUNNEL_GROUPS].out == b"== openvpn\n== tap\n== tun\ntun0\n== wg\n", cmd
        k = {c.kind: c for c in assess(ev, "p", "paste").consumers}
        assert k["ovpn-dco"].present is False and k["wireguard"].present is False


def test_real_ktls_enable_line_becomes_the_ktls_step() -> None:
    ev = evidence_from_paste(DMESG + body("ktls/moeller-nbd-ktls-enable-set.txt"))
    assert ev is not None and ev.steps[StepName.SYSCTL_KTLS].out == b"kern.ipc.tls.enable: 0 -> 1\n"
    ktls = {c.kind: c for c in assess(ev, "p", "paste").consumers}["ktls"]
    assert ktls.present is True and ktls.verdict == "unknown"  # the sw session counters were not pasted


def test_real_reflowed_ipsec_listing_pasted_is_split_into_its_entries() -> None:
    ev = evidence_from_paste(DMESG + body("ipsec/de-howto-kame-sysctl-net-inet-ipsec-reflowed.txt"))
    assert ev is not None
    from bsdcrypt.parsers.sysctl import parse_sysctl

    got = parse_sysctl(ev.steps[StepName.SYSCTL_IPSEC].text)
    assert len(got) == 10 and got["net.inet.ipsec.ecn"] == "0" and got["net.inet.ipsec.debug"] == "0"


def test_opnsense_openvpn_over_tun_is_never_counted_as_dco() -> None:
    # OPNsense's ovpns1 in groups tun AND openvpn (a real `ifconfig ovpns1`, opnsense/core#5588)
    ovpns1 = body("ifconfig/opnsense-core5588-ovpns1-groups-tun-openvpn.txt")
    ev = evidence_from_paste(DMESG + ovpns1)
    assert ev is not None and StepName.TUNNEL_GROUPS not in ev.steps  # alone it proves no DCO and no absence
    block = ovpns1.split("\n", 1)[1]
    ev = evidence_from_paste(DMESG + "$ ifconfig -a\n" + block)  # had it been the whole listing
    assert ev is not None
    assert ev.steps[StepName.TUNNEL_GROUPS].out == b"== openvpn\novpns1\n== tap\n== tun\novpns1\n== wg\n"
    ovpn = {c.kind: c for c in assess(ev, "p", "paste").consumers}["ovpn-dco"]
    assert ovpn.present is not True and ovpn.items == []
