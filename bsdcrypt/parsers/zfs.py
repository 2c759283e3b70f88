"""`zfs get` output -> list[ZfsDataset] (the encryption and keystatus properties).

Two shapes (openzfs cmd/zfs/zfs_main.c, zfs get): scripted `-H`, whose -o columns are separated by
one tab and which has no header (what the probe runs: `zfs get -H -o name,property,value ...`), and
the human form, columns NAME PROPERTY VALUE SOURCE padded with spaces, often pasted through grep
(no header) or with a prompt line. Lines of other properties, prompts, comments and errors
(`sh: zfs: not found`) are ignored. `-` as keystatus (an unencrypted dataset) reads None.
"""

from __future__ import annotations

from bsdcrypt.facts import ZfsDataset
from bsdcrypt.parsers import clean_text

_PROPS = ("encryption", "keystatus")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/@#%+")
_MAX_LINES = 200_000  # bounds the work on a hostile paste


def _fields(line: str) -> list[str] | None:
    if "\t" in line:
        parts = line.split("\t")
    else:
        parts = line.split()
    if len(parts) < 3 or parts[1] not in _PROPS:
        return None
    name = parts[0].strip()
    if not name or not set(name) <= _NAME_CHARS or name[0] in "/-#":
        return None
    return [name, parts[1], parts[2].strip()]


def parse_zfs_get(text: str) -> list[ZfsDataset]:
    """The datasets in first-seen order, each with the properties its lines showed. Never raises."""
    seen: dict[str, dict[str, str | None]] = {}
    for line in clean_text(text).splitlines()[:_MAX_LINES]:
        f = _fields(line.rstrip("\r"))
        if f is None:
            continue
        name, prop, value = f
        props = seen.setdefault(name, {})
        props[prop] = None if value in ("-", "") else value
    return [ZfsDataset(name=n, encryption=p.get("encryption"), keystatus=p.get("keystatus")) for n, p in seen.items()]


def is_encrypted(ds: ZfsDataset) -> bool | None:
    """Whether the dataset is encrypted (None: its encryption line was not shown)."""
    if ds.encryption is None:
        return None
    return ds.encryption != "off"
