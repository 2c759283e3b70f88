"""`swapinfo -k` (usr.sbin/pstat/pstat.c) -> free swap."""

from __future__ import annotations


def parse_swapinfo_avail_kib(text: str) -> int:
    """Sum of the Avail column of `swapinfo -k` device lines (0 with no swap configured)."""
    total = 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[0] in ("Device", "Total"):
            continue
        try:
            total += int(parts[3])
        except ValueError:
            continue
    return total
