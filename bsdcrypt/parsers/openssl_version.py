"""`openssl version [-a] [-c]` -> which library, which version, and the CPU vector it detected.

Pure. The shapes (OpenSSL's apps/version.c and crypto/cversion.c / crypto/info.c at each tag):

* 1.0.2 / 1.1.1: first line OPENSSL_VERSION_TEXT, `OpenSSL 1.0.2k-freebsd  26 Jan 2017` (two
  spaces before the date); `-a` adds `built on:`, `platform:`, `options:  `, `compiler:`,
  `OPENSSLDIR:` (1.1.1: `ENGINESDIR:`, `Seeding source:`). Nothing prints the capability vector.
* 3.0 - 3.4: `OpenSSL 3.0.19 27 Jan 2026 (Library: OpenSSL 3.0.19 27 Jan 2026)` (the program's
  text, then the libcrypto's when the numbers differ or always, per version.c); `-c` and `-a` add
  `CPUINFO: OPENSSL_ia32cap=0x%llx:0x%llx` and ` env:<the variable>` when it is set (info.c).
* 3.5+: the same, CPUINFO with five words printed `0x%.16llx` (info.c l.56 @openssl-3.5.5).
* LibreSSL: `LibreSSL 3.3.6`, and no CPUINFO (it never reads OPENSSL_ia32cap).

The ` env:` echo is cut at CPU_INFO_STR_LEN (128 bytes in 3.0, 256 in 3.5): compare the words, not it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bsdcrypt.parsers import clean_text

_TEXT = r"(OpenSSL|LibreSSL)\s+(\d{1,3})\.(\d{1,3})\.(\d{1,3})([a-z]{0,2})((?:-[A-Za-z0-9_.+]+)*)"
# Patterns as text: `re` compiles (and caches) them on first use, not on status's start-up path.
_FIRST = r"^" + _TEXT + r"(?:\s.*?)??(?:\s+\(Library:\s+" + _TEXT + r"[^)]*\))?\s*$"
_WORDS = r"(0x[0-9a-fA-F]{1,16}(?::0x[0-9a-fA-F]{1,16}){0,9})"
_CPUINFO = r"^CPUINFO:\s+OPENSSL_ia32cap=" + _WORDS + r"(?:\s+env:(.*))?$"
_OTHER_CAP = r"^CPUINFO:\s+OPENSSL_(armcap|ppccap|s390xcap|riscvcap|sparcv9cap)="
_PRE = r"(?i)^-(pre\d+|alpha\d+|beta\d+|dev)$"
_MAX_LINE = 1024  # the longest version line read (OPENSSL_VERSION_TEXT twice is ~100 characters)


@dataclass(frozen=True)
class OpensslVersion:
    """What one `openssl` program said about itself and the libcrypto it runs with."""

    library: str  # "OpenSSL" or "LibreSSL" (of the libcrypto when the program names it)
    version: str  # the library's version as printed: "3.0.19", "1.0.2k-freebsd", "3.0.7-fips"
    major: int
    minor: int
    patch: int
    letter: str = ""  # 1.x patch letter: "k" in 1.0.2k ("" for 3.x)
    prerelease: str | None = None  # "pre8", "alpha6", "beta1"
    program_version: str | None = None  # the program's own version when "(Library: ...)" differs
    ia32cap: tuple[int, ...] | None = None  # the CPUINFO words (the effective vector), x86 3.x only
    ia32cap_env: str | None = None  # the OPENSSL_ia32cap it echoed after `env:` (may be cut off)
    other_cap: str | None = None  # "armcap" etc. on a non-x86 3.x

    @property
    def number(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)


def _version(groups: tuple[str | None, ...]) -> tuple[str, str, int, int, int, str, str | None]:
    lib, a, b, c, letter, suffix = groups
    assert lib is not None and a is not None and b is not None and c is not None
    suffix = suffix or ""
    pre = None
    for part in re.findall(r"-[A-Za-z0-9_.+]+", suffix):
        m = re.match(_PRE, part)
        if m:
            pre = m.group(1).lower()
    text = f"{a}.{b}.{c}{letter or ''}{suffix}"
    return lib, text, int(a), int(b), int(c), letter or "", pre


def parse_version(text: str) -> OpensslVersion | None:
    """The first version line and the CPUINFO line of `openssl version [-a|-c]`; None without a
    version line (a CPUINFO-only `-c` output is read by `parse_cpuinfo`). Never raises."""
    found: OpensslVersion | None = None
    for raw in clean_text(text).splitlines():
        if len(raw) > _MAX_LINE:
            continue  # _FIRST backtracks quadratically over a long blank run: no version line is this long
        m = re.match(_FIRST, raw.strip())
        if m:
            prog = _version(m.groups()[0:6])
            lib = _version(m.groups()[6:12]) if m.group(7) else prog
            found = OpensslVersion(
                library=lib[0],
                version=lib[1],
                major=lib[2],
                minor=lib[3],
                patch=lib[4],
                letter=lib[5],
                prerelease=lib[6],
                program_version=prog[1] if prog[1] != lib[1] else None,
            )
            break
    if found is None:
        return None
    cap, env, other = parse_cpuinfo(text)
    return OpensslVersion(**{**found.__dict__, "ia32cap": cap, "ia32cap_env": env, "other_cap": other})


def parse_cpuinfo(text: str) -> tuple[tuple[int, ...] | None, str | None, str | None]:
    """(words, env echo, other arch) from the CPUINFO line of 3.x `version -c`/`-a`/`speed`. Never raises."""
    for raw in clean_text(text).splitlines():
        line = raw.strip()
        m = re.match(_CPUINFO, line)
        if m:
            words = tuple(int(w, 16) for w in m.group(1).split(":"))
            env = m.group(2)
            return words, (env if env is not None and env.isprintable() else None), None
        o = re.match(_OTHER_CAP, line)
        if o:
            return None, None, o.group(1)
    return None, None, None
