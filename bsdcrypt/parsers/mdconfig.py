"""`mdconfig -l [-v]` (sbin/mdconfig/mdconfig.c) -> md units, their type, size and label."""

from __future__ import annotations

import re
from dataclasses import dataclass

MD_NAME = re.compile(r"^md[0-9]+$")


_HUMAN = re.compile(r"^([0-9]{1,20}(?:\.[0-9]{1,20})?)\s*([BKMGTPE]?)$", re.I)  # on the stripped text


def parse_human_size(text: str) -> int | None:
    """mdconfig -l -v's length (libutil humanize_number, HN_AUTOSCALE|HN_DECIMAL, 1024-based):
    "1.0G", "512M", "64M" -> bytes (rounded as printed)."""
    m = _HUMAN.match(text.strip())
    if not m:
        return None
    scale = "BKMGTPE".index(m.group(2).upper() or "B")
    return int(float(m.group(1)) * 1024**scale)


@dataclass(frozen=True)
class MdEntry:
    name: str
    type: str | None
    label: str | None
    size: int | None = None  # bytes, as far as the humanized length tells (-v only)


MdRow = MdEntry  # bench's name for one row


def parse_mdconfig_list(text: str) -> list[MdEntry]:
    """`mdconfig -l -v`: `md0\\tswap\\t  1.0G\\t-\\tbsdcrypt-bench\\tcompress` (13+; older: no file/label).

    sbin/mdconfig/mdconfig.c md_list(), tab-separated: `name type length [file]` before labels
    (2012); since -L: `name type length file|- label|- options`.
    """
    entries: list[MdEntry] = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split("\t")]
        if not fields or not MD_NAME.match(fields[0]):
            # `mdconfig -l` without -v: names separated by spaces on one line
            entries.extend(MdEntry(n, None, None) for n in line.split() if MD_NAME.match(n))
            continue
        label = fields[4] if len(fields) > 4 and fields[4] not in ("", "-") else None
        size = parse_human_size(fields[2]) if len(fields) > 2 else None
        entries.append(MdEntry(fields[0], fields[1] if len(fields) > 1 else None, label, size))
    return entries


def has_label_column(text: str) -> bool:
    """Does this mdconfig print the label column (FreeBSD 10.1+: `file|- label|- options` after the length)?"""
    return any(MD_NAME.match(f[0].strip()) and len(f) >= 5 for f in (line.split("\t") for line in text.splitlines()))


def parse_md_rows(text: str) -> tuple[list[MdEntry], bool]:
    """`mdconfig -l -v` -> rows (with sizes), and whether this mdconfig prints the label column."""
    return parse_mdconfig_list(text), has_label_column(text)
