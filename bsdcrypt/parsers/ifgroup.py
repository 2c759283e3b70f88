"""Interface groups -> {group: [interfaces]}, from the probe's listing or from `ifconfig` output.

The probe prints `== GROUP` and then `ifconfig -g GROUP`, which lists the member interfaces one
name per line (sbin/ifconfig/ifgroup.c); nothing for a group without members. Groups: `openvpn`
(sys/net/if_ovpn.c: the DCO cloner is named "openvpn", and if_clone puts every interface in the
group of its cloner's name), `wg` (if_wg), `tun` and `tap`. pfSense also adds its tun(4)/tap(4)
OpenVPN interfaces (ovpnsN/ovpncN, renamed tunN/tapN) to group `openvpn` (src/etc/inc/openvpn.inc);
those stay in group `tun` or `tap` too, which no DCO interface is in. Any other line under a group
(ifconfig's `SIOCGIFGMEMB` error, a shell's "not found") leaves that group unknown: a group without
members prints nothing (printgroup exits 0 on ENOENT). The kernel takes any name of 1-15 bytes
(if_rename checks only that it is not empty and unused): `wg-home` is a member like `wg0`.

`ifconfig [-a | IFACE]` prints a block per interface: `NAME: flags=HEX<...> metric N mtu N`, then
indented lines, among them `\tgroups: G1 G2 ...` (sbin/ifconfig/ifgroup.c getifgroups: every group but
`all`, the line left out for an interface in none).
"""

from __future__ import annotations

import re

from bsdcrypt.parsers import clean_text

_IFNAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.]{0,15}$")
_IF_HEADER = re.compile(r"^\s?([^\s:]{1,15}): flags=[0-9a-fA-F]+<")
_GROUPS = re.compile(r"^\s+groups:\s*(.*)$")
_MAX = 4096


def is_ifname(name: str) -> bool:
    """Whether `name` can be a FreeBSD interface name as ifconfig prints it (IFNAMSIZ - 1 bytes at
    most; no blank, no `:`, nothing a terminal would act on)."""
    return 0 < len(name) <= 15 and name.isprintable() and ":" not in name and not any(c.isspace() for c in name)


def parse_groups(text: str) -> dict[str, list[str]]:
    """Never raises; groups the text did not list are absent (unknown), listed-but-empty are [], and
    a group under which anything but member names was printed (an error) is absent too."""
    out: dict[str, list[str]] = {}
    failed: set[str] = set()
    group: str | None = None
    for raw in clean_text(text).splitlines():
        line = raw.strip()
        if line.startswith("== "):
            group = line[3:].strip()
            if _IFNAME.match(group):
                out.setdefault(group, [])
            else:
                group = None
        elif group is None or not line:
            continue
        elif not is_ifname(line):
            failed.add(group)
        elif len(out[group]) < _MAX:
            out[group].append(line)
    return {g: names for g, names in out.items() if g not in failed}


def parse_ifconfig(text: str) -> dict[str, list[str]]:
    """{interface: its groups} for every interface block shown, in order; an interface whose block
    has no `groups:` line maps to [] (ifconfig prints the line only for an interface in a group).
    Never raises."""
    out: dict[str, list[str]] = {}
    name: str | None = None
    for line in clean_text(text).splitlines():
        if (m := _IF_HEADER.match(line)) and is_ifname(m.group(1)):
            name = m.group(1)
            if name not in out and len(out) < _MAX:
                out[name] = []
            elif name not in out:
                name = None
        elif name is not None and (g := _GROUPS.match(line)):
            out[name] = [w for w in g.group(1).split() if _IFNAME.match(w)][:64]
        elif line.strip() and not line[:1].isspace():
            name = None  # an unindented line that is no interface header ends the block
    return out


def members(ifaces: dict[str, list[str]], group: str) -> list[str]:
    """The shown interfaces in `group`."""
    return [i for i, groups in ifaces.items() if group in groups]
