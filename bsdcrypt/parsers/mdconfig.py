"""`mdconfig -l [-v]` (sbin/mdconfig/mdconfig.c) -> md units, their type and label."""

from __future__ import annotations

import re
from dataclasses import dataclass

MD_NAME = re.compile(r"^md[0-9]+$")


@dataclass(frozen=True)
class MdEntry:
    name: str
    type: str | None
    label: str | None


def parse_mdconfig_list(text: str) -> list[MdEntry]:
    """`mdconfig -l -v`: `md0\\tswap\\t  1.0G\\t-\\tbsdcrypt-bench\\tcompress` (13+; older: no file/label)."""
    entries: list[MdEntry] = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split("\t")]
        if not fields or not MD_NAME.match(fields[0]):
            # `mdconfig -l` without -v: names separated by spaces on one line
            entries.extend(MdEntry(n, None, None) for n in line.split() if MD_NAME.match(n))
            continue
        label = fields[4] if len(fields) > 4 and fields[4] not in ("", "-") else None
        entries.append(MdEntry(fields[0], fields[1] if len(fields) > 1 else None, label))
    return entries
