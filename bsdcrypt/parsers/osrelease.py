"""os-release(5) files and the version files of FreeBSD-based products.

os-release: `KEY=value` lines in shell syntax (FreeBSD writes it from libexec/rc/rc.d/os-release:
`NAME=FreeBSD`, `VERSION="14.1-RELEASE-p5"`, ...). Products:
  pfSense   /etc/platform = "pfSense", /etc/version = "2.4.5-RELEASE" (pfsense/pfsense src/etc)
  OPNsense  `opnsense-version` prints
            "${product_name} ${product_version} (${product_arch}/${product_flavour})"
            (opnsense/core src/sbin/opnsense-version); old releases had /etc/platform = "OPNsense"
  TrueNAS / FreeNAS  /etc/version like "TrueNAS-13.0-U6" / "FreeNAS-11.3-U5" (secondary sources only)
  GhostBSD  `ghostbsd-version` like "25.02-R14.3p8"; /etc/version "GhostBSD <version>"
"""

from __future__ import annotations

import re
import shlex

from bsdcrypt.facts import Product
from bsdcrypt.parsers import clean_text

_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
# Values shlex would give back unchanged: one word without quotes, escapes, comments or blanks, or
# one quoted string without an escape or its own quote inside (the usual os-release lines).
_PLAIN = re.compile(r"[^ \t\r\n\"'\\#]*")
_QUOTED = re.compile(r"\"([^\"\\]*)\"|'([^']*)'")


def _unquote(value: str) -> str:
    value = value.strip()
    if not value:
        return ""
    if _PLAIN.fullmatch(value):  # shlex.split is ~20 us a value: only where it can change something
        return value
    quoted = _QUOTED.fullmatch(value)
    if quoted:
        return quoted.group(1) if quoted.group(1) is not None else quoted.group(2)
    try:
        parts = shlex.split(value, comments=True, posix=True)
    except ValueError:  # unbalanced quotes: keep what is there
        return value.strip("\"'")
    return " ".join(parts)


def parse_os_release(text: str) -> dict[str, str]:
    """Parse os-release(5): KEY=value with shell quoting; comments and junk lines skipped."""
    out: dict[str, str] = {}
    for raw in clean_text(text).splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _KEY.match(line)
        if m:
            out[m.group(1)] = _unquote(m.group(2))
    return out


_OPNSENSE = re.compile(r"^(OPNsense(?: [A-Za-z]+)?) (\d+\.\d+\S*) \(([^/()\s]+)/([^()\s]+)\)$")
_NAS = re.compile(r"^(TrueNAS|FreeNAS)-(?:SCALE-)?(\d+\.\d+\S*?)(?:\s+\([^)]*\))?$")
_NAMED = re.compile(r"^(GhostBSD|MidnightBSD) v?(\d+\.\d+\S*)$")
_GHOSTBSD = re.compile(r"^\d+\.\d+\S*$")
_PFS_VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?(?:[-_][A-Za-z0-9.]+)*$")


def _first_line(text: str | None) -> str | None:
    if text is None:
        return None
    for line in clean_text(text).splitlines():
        if line.strip():
            return line.strip()
    return None


def parse_product(
    platform: str | None,
    version_file: str | None,
    opnsense_version: str | None,
    ghostbsd_version: str | None,
    pfsense_release: str | None,
) -> Product | None:
    """Identify the product from its version files/commands; None for plain FreeBSD or unknown.

    Arguments are the raw contents (None when the file or command was absent or failed).
    """
    line = _first_line(opnsense_version)
    if line and (m := _OPNSENSE.match(line)):
        return Product(m.group(1), m.group(2), "opnsense")
    line = _first_line(ghostbsd_version)
    if line and _GHOSTBSD.match(line):
        return Product("GhostBSD", line, "ghostbsd")
    plat = _first_line(platform)
    ver = _first_line(version_file)
    if plat is not None:
        key = plat.lower()
        if key == "pfsense":
            for candidate in (ver, _first_line(pfsense_release)):
                if candidate and _PFS_VERSION.match(candidate):
                    return Product("pfSense", candidate, "pfsense")
            return Product("pfSense", None, "pfsense")
        if key == "opnsense":
            return Product("OPNsense", None, "opnsense")
    rel = _first_line(pfsense_release)
    if rel and _PFS_VERSION.match(rel) and plat is None and ver is None:
        return Product("pfSense", rel, "pfsense")
    if ver:
        if m := _NAS.match(ver):
            return Product(m.group(1), m.group(2), m.group(1).lower())
        if m := _NAMED.match(ver):
            return Product(m.group(1), m.group(2), m.group(1).lower())
    return None
