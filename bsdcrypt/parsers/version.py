"""Release strings, freebsd-version(1) and uname(1) output.

Release strings are `REVISION-BRANCH` as sys/conf/newvers.sh builds them, with the `-pN` patch
level and HardenedBSD's `-HBSD` suffix: `13.0-RELEASE-p4`, `12.1-RELEASE-p8-HBSD`, `13.0-STABLE-HBSD`,
`14.0-CURRENT`, `15.0-BETA2`. MidnightBSD prints a bare `2.2.6` (seen in its dmesg banner).
"""

from __future__ import annotations

import re

from bsdcrypt.facts import Release
from bsdcrypt.parsers import clean_text

_RELEASE = re.compile(
    r"^(\d{1,3})\.(\d{1,3})(?:\.\d{1,3})?"  # REVISION (MidnightBSD has a third number)
    r"(?:-([A-Z][A-Z0-9]*))?"  # BRANCH: RELEASE, STABLE, CURRENT, BETA2, RC1, PRERELEASE, ...
    r"(?:-p(\d{1,4}))?"  # patch level
    r"(-HBSD)?$"
)
_SYSNAME = re.compile(r"^[A-Za-z]*BSD$")
_MACHINES = {"amd64", "i386", "arm64", "arm", "powerpc", "riscv", "mips", "sparc64", "pc98"}
_ARCHES = {
    "amd64", "i386", "aarch64", "armv6", "armv7", "powerpc", "powerpc64", "powerpc64le",
    "powerpcspe", "riscv64", "mips", "mips64", "sparc64",
}


def parse_release(text: str) -> Release | None:
    """`13.0-RELEASE-p4` -> Release; anything else (including surrounding words) -> None."""
    raw = text.strip()
    m = _RELEASE.match(raw)
    if not m:
        return None
    if m.group(3) == "HBSD":  # "13.0-HBSD" is not a branch
        return None
    return Release(
        raw=raw,
        major=int(m.group(1)),
        minor=int(m.group(2)),
        branch=m.group(3) or "",
        patch=int(m.group(4)) if m.group(4) is not None else None,
        hbsd=m.group(5) is not None,
    )


def parse_freebsd_version(text: str) -> str | None:
    """The first line of freebsd-version(1) output that is a release string."""
    for line in clean_text(text).splitlines():
        if parse_release(line) is not None:
            return line.strip()
    return None


def _ident(version: str) -> str | None:
    """Kernel config name from uname -v: the last path component, or the last word."""
    words = version.split()
    if not words:
        return None
    last = words[-1]
    if "/" in last:
        tail = last.rstrip("/").rsplit("/", 1)[-1]
        return tail or None
    if parse_release(last) is not None or last.endswith(":") or last.startswith("#"):
        return None
    return last


def _from_uname_line(line: str) -> dict[str, str] | None:
    tokens = line.split()
    for i in range(len(tokens) - 2):
        tok = re.sub(r"^.*[\"'=]", "", tokens[i])  # UNAME="FreeBSD ..., 'FreeBSD ...
        if _SYSNAME.match(tok) and parse_release(tokens[i + 2]) is not None:
            break
    else:
        return None
    sysname, hostname, release = tok, tokens[i + 1], tokens[i + 2]
    rest = tokens[i + 3 :]
    if rest:
        rest[-1] = rest[-1].rstrip("\"'")
        rest = [t for t in rest if t]
    out = {"sysname": sysname, "hostname": hostname, "release": release}
    processor: str | None = None
    if len(rest) >= 2 and rest[-2] in _MACHINES and rest[-1] in _ARCHES:
        processor = rest.pop()
    if rest and (rest[-1] in _MACHINES or rest[-1] in _ARCHES):
        out["machine"] = rest.pop()
    if processor is not None:
        out["processor"] = processor
    if rest:
        # keep the version's own spacing: cut it out of the original line
        start = line.find(rest[0], line.find(release) + len(release))
        end = line.rfind(rest[-1]) + len(rest[-1])
        version = line[start:end].strip() if 0 <= start < end else " ".join(rest)
        out["version"] = version
        # without the machine after it the line may be cut inside the version ("... 12.2-RELEASE-p7 Fre"):
        # its last word is then no config name
        ident = _ident(version) if "machine" in out else None
        if ident is not None:
            out["ident"] = ident
    return out


_ECHO = re.compile(r"\buname\s+-([srmpnK])\s*$")
_ECHO_KEYS = {"s": "sysname", "r": "release", "m": "machine", "p": "processor", "n": "hostname"}


def parse_uname_a(text: str) -> dict[str, str]:
    """Parse `uname -a` (also -snrmp/-ap, `UNAME="..."`, `Uname: ...` embeddings).

    Keys present only when seen: sysname, hostname, release, version (uname -v), ident (kernel
    config name taken from the version), machine, processor. Falls back to bare lines: a
    `uname -X` command echo followed by its output, or lone `FreeBSD` / release lines. Never raises.
    """
    lines = clean_text(text).splitlines()
    best: dict[str, str] | None = None
    for line in lines:
        got = _from_uname_line(line)
        if got is not None and (best is None or len(got) > len(best)):
            best = got  # `uname -snrmp` and `uname -ap` in one capture: keep the fuller one
    if best is not None:
        return best
    out: dict[str, str] = {}
    for i, line in enumerate(lines):
        m = _ECHO.search(line)
        if m and m.group(1) in _ECHO_KEYS and i + 1 < len(lines) and lines[i + 1].strip():
            value = lines[i + 1].strip()
            key = _ECHO_KEYS[m.group(1)]
            if key == "release" and parse_release(value) is None:
                continue
            out.setdefault(key, value)
    if out:
        return out
    for line in lines:
        s = line.strip()
        if "sysname" not in out and _SYSNAME.match(s):
            out["sysname"] = s
        elif "release" not in out and parse_release(s) is not None:
            out["release"] = s
    return out
