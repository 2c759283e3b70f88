"""The kernel crypto consumers (status.consumers, issue 27) as text: the status table's Consumers row,
the HTML details and the fleet's "AES in software" cell. Host text goes through bsdcrypt.text first."""

from __future__ import annotations

from bsdcrypt.status import ConsumerInfo, ConsumerItem, Status

LABELS = {
    "geli": "GELI", "zfs": "ZFS encryption", "ipsec": "IPsec", "ktls": "kernel TLS", "ovpn-dco": "OpenVPN DCO",
    "wireguard": "WireGuard",
}
ITEMS_SHOWN = 4  # items per consumer in a text report (the JSON lists all)
NOT_GATHERED = "not gathered"


def told(c: ConsumerInfo) -> bool:
    """Whether the evidence said anything of this consumer (a step that was not gathered says nothing)."""
    return c.present is not None or not (c.reason or "").startswith(NOT_GATHERED)


def _item(i: ConsumerItem) -> str:
    text = " ".join(x for x in (i.name, i.algorithm) if x)
    text += f": {i.verdict}"
    if i.by:
        text += f" by {i.by}"
    if i.why and i.verdict in ("software", "unknown", "not-in-use"):
        text += f" ({i.why})"
    return text


def lines(s: Status, skip: tuple[str, ...] = ("geli",)) -> list[str]:
    """One line per consumer the evidence told of and that is there (or whose state is unknown for a
    reason worth reading), then its items indented. GELI has its own row, so it is skipped by default."""
    out: list[str] = []
    for c in s.consumers:
        if c.kind in skip or not told(c) or c.present is False:
            continue
        out.append(f"{LABELS.get(c.kind, c.kind)}: {c.verdict}, {c.detail}" + (f" ({c.reason})" if c.reason else ""))
        out += [f"  {_item(i)}" for i in c.items[:ITEMS_SHOWN]]
        if len(c.items) > ITEMS_SHOWN:
            out.append(f"  and {len(c.items) - ITEMS_SHOWN} more (-f json lists all)")
    return out


def software(s: Status) -> str:
    """The fleet cell: the consumers that run AES in software now ("IPsec, ZFS encryption"), "?" when one
    the evidence told of may (its verdict unknown: IPsec SAs unreadable without root ...), "no" when the
    evidence told of the consumers and none does, "-" when it told nothing."""
    slow = [LABELS.get(c.kind, c.kind) for c in s.consumers if c.kind != "geli" and c.verdict == "software"]
    if slow:
        return ", ".join(slow)
    shown = [c for c in s.consumers if c.kind != "geli" and told(c)]
    if any(c.verdict == "unknown" and c.present is not False for c in shown):
        return "?"
    return "no" if any(c.present for c in shown) else "-"
