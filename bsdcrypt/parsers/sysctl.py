"""sysctl(8) output (`name: value` lines) -> dict.

sysctl prints `%s: %s` (name, value) per leaf; errors go to stderr as `sysctl: unknown oid '%s'`
(sbin/sysctl/sysctl.c), which the probe merges into the same text. OID names may contain spaces
(`kern.eventtimer.et.ARM MPCore Eventtimer.flags`), `%` (`dev.aesni.0.%desc`) and `-`.
"""

from __future__ import annotations

import re

from bsdcrypt.parsers import clean_text

# What the left side of ": " must look like: a dotted name starting with a letter, whose parts
# hold letters, digits and the punctuation seen in real OID names (spaces inside, not at the ends).
_OID = re.compile(r"^[A-Za-z_][\w%\-]*(?:\.[\w%\-+@#()/ ]*[\w%\-+@#()/]|\.)+$")


_MAX_NAME = 256  # longer left sides are not OIDs; bounds the work on hostile lines
_MAX_JOINED = 64  # entries split off one reflowed line (bounds the work; more on that line are dropped)
_NEXT_REST = re.compile(r"[\w%\-.]+:(?:\s|$)")  # after `A.B.`: the rest of the next entry's name and its colon


def _split(line: str) -> tuple[str, str] | None:
    start = 0
    while True:
        k = line.find(":", start)
        if k < 0 or k > _MAX_NAME:
            return None
        if k + 1 == len(line) or line[k + 1] in " \t":
            name = line[:k]
            if _OID.match(name) and not name.endswith("."):
                return name, line[k + 1 :].strip()
        start = k + 1


def _joined(name: str, value: str) -> tuple[str, str | None]:
    """(value, rest): a page or an editor that reflowed the listing joins entries on one line
    (`net.inet.ipsec.ecn: 0 net.inet.ipsec.debug: 0`); the next entry starts at a word that is an
    OID of the same first two parts followed by `:`. Real values hold no such word."""
    if ":" not in value:
        return value, None  # no next entry's `name:` in it (most values)
    second = name.find(".", name.find(".") + 1)
    if second < 0:
        return value, None  # fewer than three parts
    # str.find for the prefix (the first two parts), one compiled pattern for the rest: a pattern built
    # per OID name cost a compile for each new name (30x the parse time on a text of many distinct names)
    prefix = name[: second + 1]
    k = value.find(prefix)
    while k >= 0:
        if (k == 0 or value[k - 1].isspace()) and _NEXT_REST.match(value, k + len(prefix)):
            return value[:k].strip(), value[k:]
        k = value.find(prefix, k + 1)
    return value, None


def parse_sysctl(text: str) -> dict[str, str]:
    """Parse `sysctl NAME...` / `sysctl -a` output. Values are stripped at the ends only.

    Lines that are not `oid: value` (errors, prompts, kern.conftxt lines) are ignored; an indented
    line directly after an entry continues a multi-line value (kern.version); entries a reflow joined
    on one line are split (_joined). Never raises.
    """
    out: dict[str, str] = {}
    more: dict[str, list[str]] = {}  # continuation lines, joined once at the end (not string += per line)
    last: str | None = None
    for raw in clean_text(text).splitlines():
        if raw.startswith("sysctl: "):
            last = None
            continue
        parsed = _split(raw)
        if parsed is None:
            if last is not None and raw[:1] in (" ", "\t") and raw.strip():
                more.setdefault(last, []).append(raw.strip())
            else:
                last = None
            continue
        for _ in range(_MAX_JOINED):
            name, value = parsed
            value, rest = _joined(name, value)
            out[name] = value
            more.pop(name, None)
            last = name
            if rest is None or (parsed := _split(rest)) is None:
                break
    for name, lines in more.items():
        out[name] = "\n".join([out[name], *lines] if out[name] else lines)
    return out


_UNKNOWN = re.compile(r"^sysctl: unknown oid '([^']*)'")


def unknown_oids(text: str) -> list[str]:
    """The names sysctl(8) reported as `unknown oid` in the same (stdout+stderr) text."""
    return [m.group(1) for line in clean_text(text).splitlines() if (m := _UNKNOWN.match(line))]


def parse_boottime(value: str | None) -> int | None:
    """`kern.boottime`: `{ sec = 1700000000, usec = 123456 } Tue Nov 14 ...` -> 1700000000."""
    m = re.search(r"sec\s*=\s*(\d+)", value or "")
    return int(m.group(1)) if m else None
