"""`geli list` output -> list[GeliProvider].

Format (sbin/geom/core/geom.c list_one_geom): "Geom name: %s", then the geom's config as
"%s: %s" lines (order not relied on), "Providers:" / "Consumers:" with "%u. Name: %s" and
indented "   Mediasize: ...", "   Sectorsize: ...", "   Mode: ..." lines, then a blank line.
Errors go to stderr as `geli: ...` (e.g. "Class 'ELI' not found.", "Command 'list' not
available; try 'load' first.", "Invalid class name 'eli'.") and yield [].
"""

from __future__ import annotations

import re

from bsdcrypt.facts import GeliProvider
from bsdcrypt.parsers import clean_text, decimal

_KEYS = (
    "Geom name", "State", "EncryptionAlgorithm", "KeyLength", "AuthenticationAlgorithm", "Crypto",
    "Version", "UsedKey", "Flags", "KeysAllocated", "KeysTotal", "Providers", "Consumers",
    "Mediasize", "Sectorsize", "Stripesize", "Stripeoffset", "Mode",
)
# `(?<!\d)`: a number is tried from its first digit only (from every digit, a long digit run cost quadratic time)
_REFLOW = re.compile(r"(?<=\S)\s*(" + "|".join(re.escape(k) for k in _KEYS) + r"|(?<!\d)\d+\. Name):")
_ITEM = re.compile(r"^\d+\. Name: ?(.*)$")
_CONF = re.compile(r"^([A-Za-z][A-Za-z0-9 _-]*?): ?(.*)$")


def _unflow(line: str) -> list[str]:
    """Split a line that a web page reflowed (several `Key:` fields glued together)."""
    if len(_REFLOW.findall(line)) < 3:
        return [line]
    return _REFLOW.sub(lambda m: "\n" + m.group(1) + ":", line).split("\n")


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    m = re.match(r"^\s*([0-9]+)", value)
    return decimal(m.group(1)) if m else None


def _make(name: str, conf: dict[str, str], consumer: str | None) -> GeliProvider:
    flags_raw = conf.get("Flags", "").strip()
    flags = () if flags_raw in ("", "NONE") else tuple(f.strip() for f in flags_raw.split(",") if f.strip())
    return GeliProvider(
        name=name,
        state=conf.get("State") or None,
        encryption=conf.get("EncryptionAlgorithm") or None,
        key_length=_int(conf.get("KeyLength")),
        crypto=conf.get("Crypto") or None,
        authentication=conf.get("AuthenticationAlgorithm") or None,
        flags=flags,
        version=_int(conf.get("Version")),
        consumer=consumer,
    )


def parse_geli_list(text: str) -> list[GeliProvider]:
    """Parse `geli list` (all geoms or named ones). Never raises; garbage or errors give []."""
    lines: list[str] = []
    for raw in clean_text(text).splitlines():
        lines.extend(_unflow(raw))
    out: list[GeliProvider] = []
    name: str | None = None
    conf: dict[str, str] = {}
    consumer: str | None = None
    section = "geom"

    def flush() -> None:
        if name:
            out.append(_make(name, conf, consumer))

    for raw in lines:
        line = raw.strip()
        if line.startswith("Geom name:"):
            flush()
            name = line[len("Geom name:"):].strip() or None
            conf, consumer, section = {}, None, "geom"
            continue
        if name is None:
            continue
        if line in ("Providers:", "Consumers:"):
            section = line[:-1].lower()
            continue
        m = _ITEM.match(line)
        if m:
            if section == "consumers" and consumer is None:
                consumer = m.group(1).strip() or None
            continue
        if section != "geom" or raw[:1] in (" ", "\t"):
            continue  # provider/consumer details
        m = _CONF.match(line)
        if m:
            conf[m.group(1)] = m.group(2).strip()
    flush()
    return out
