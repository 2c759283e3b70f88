"""The probe's interface-group listing -> {group: [interfaces]}.

The probe prints `== GROUP` and then `ifconfig -g GROUP`, which lists the member interfaces one
name per line (sbin/ifconfig/ifgroup.c); nothing for a group without members. Groups: `openvpn`
(sys/net/if_ovpn.c puts every OpenVPN DCO interface, ovpnN, in it) and `wg` (if_wg). A line that is
not an interface name (an error) is ignored.
"""

from __future__ import annotations

import re

from bsdcrypt.parsers import clean_text

_IFNAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.]{0,15}$")


def parse_groups(text: str) -> dict[str, list[str]]:
    """Never raises; groups the text did not list are absent (unknown), listed-but-empty are []."""
    out: dict[str, list[str]] = {}
    group: str | None = None
    for raw in clean_text(text).splitlines():
        line = raw.strip()
        if line.startswith("== "):
            group = line[3:].strip()
            if _IFNAME.match(group):
                out.setdefault(group, [])
            else:
                group = None
        elif group is not None and _IFNAME.match(line) and len(out[group]) < 4096:
            out[group].append(line)
    return out
