"""Interface names as FreeBSD allows them (if_rename takes any 1-15 bytes: `wg-home`, `vpn@office`),
and what is no name (an error, a control character, 16 bytes or more): the group is then unknown."""

from __future__ import annotations

import pytest

from bsdcrypt.assess import assess
from bsdcrypt.parsers.ifgroup import is_ifname, members, parse_groups, parse_ifconfig
from bsdcrypt.probe import Evidence, Step, StepName

UNAME = b"FreeBSD fw 14.1-RELEASE FreeBSD 14.1-RELEASE releng/14.1-n267679-10e31f0946d8 GENERIC amd64\n"


@pytest.mark.parametrize(("name", "ok"), [
    ("wg0", True), ("wg-home", True), ("vpn@office", True), ("ovpns1", True), ("a" * 15, True),
    ("a" * 16, False), ("", False), ("wg 0", False), ("wg\x1b[2J", False), ("a:b", False), ("ifconfig:", False),
])
def test_is_ifname(name: str, ok: bool) -> None:
    assert is_ifname(name) is ok


def test_renamed_members_are_listed() -> None:
    assert parse_groups("== wg\nwg-home\nwg_office\n== openvpn\nvpn-dco\n") == {
        "wg": ["wg-home", "wg_office"], "openvpn": ["vpn-dco"]}


def test_an_ifconfig_block_of_a_renamed_interface_is_read() -> None:
    got = parse_ifconfig("wg-home: flags=80c1<UP,RUNNING,NOARP,MULTICAST> metric 0 mtu 1420\n\tgroups: wg\n"
                         "\x1b[2J: flags=8049<UP> metric 0 mtu 1500\n\tgroups: openvpn\n")
    assert got == {"wg-home": ["wg"]} and members(got, "wg") == ["wg-home"]


def _consumers(groups: bytes) -> dict[str, tuple[bool | None, str]]:
    ev = Evidence({StepName.UNAME_S: Step(0, b"FreeBSD\n"), StepName.UNAME_A: Step(0, UNAME),
                   StepName.TUNNEL_GROUPS: Step(0, groups)})
    return {c.kind: (c.present, c.verdict) for c in assess(ev, "h", "test").consumers}


def test_a_renamed_wireguard_interface_is_present_not_absent() -> None:
    assert _consumers(b"== openvpn\n== wg\nwg-home\n== tun\n== tap\n")["wireguard"] == (True, "not-affected")


def test_an_ifconfig_error_is_unknown_not_no_interface() -> None:
    got = _consumers(b"== openvpn\nifconfig: SIOCGIFGMEMB: Operation not permitted\n"
                     b"== wg\nifconfig: SIOCGIFGMEMB: Operation not permitted\n== tun\n== tap\n")
    assert got["wireguard"] == (None, "unknown") and got["ovpn-dco"] == (None, "unknown")
