"""`openssl speed [-elapsed] [-evp CIPHER]` table -> bytes per second per block size.

Pure. The table (apps/speed.c) is the same in 1.0.2, 1.1.1 and 3.x:

    The 'numbers' are in 1000s of bytes per second processed.
    type             16 bytes     64 bytes    256 bytes   1024 bytes   8192 bytes  16384 bytes
    AES-128-GCM      25738.51k   102253.31k   426706.43k  1205696.51k  3406626.82k  3735666.69k

Each value is printed with `" %11.2fk"` when it is above 10000, else `" %11.2f "`; either
way it is in **1000s of bytes per second** ('k' means x1000, not KiB). Row names can
contain a space (`aes-128 cbc` without -evp) or overflow their 13-character column
(`ChaCha20-Poly1305`), so values are taken from the right. `-aead` (3.x) uses other
block sizes (2, 31, 136, ...), read from the header. Version lines: `version: 3.0.8`
(3.x) or `OpenSSL 1.0.2k-freebsd  26 Jan 2017` (1.x); `CPUINFO: OPENSSL_ia32cap=...`
(3.x, with ` env:...` when the variable was set).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEADER = re.compile(r"^type\s+((?:\d+\s+bytes\s*)+)$")
_SIZE = re.compile(r"(\d+)\s+bytes")
_VALUE = re.compile(r"^(\d+(?:\.\d+)?)(k?)$")
_V3 = re.compile(r"^version:\s*(\S+)")
_V1 = re.compile(r"^(OpenSSL|LibreSSL)\s+(\S+)")
_CPUINFO = re.compile(r"^CPUINFO:\s*OPENSSL_ia32cap=(\S+)(?:\s+env:(\S+))?")


@dataclass(frozen=True)
class SpeedRow:
    name: str  # as printed: "AES-128-GCM", "aes-128-gcm", "aes-128 cbc", "ChaCha20-Poly1305"
    bytes_per_s: dict[int, float]  # block size -> bytes per second

    @property
    def best_block(self) -> int:
        return max(self.bytes_per_s)

    @property
    def bulk_bytes_per_s(self) -> float:
        """Throughput at the largest block size (what bulk TLS/SSH data sees)."""
        return self.bytes_per_s[self.best_block]


@dataclass(frozen=True)
class SpeedResult:
    version: str | None = None  # "3.0.19", "1.0.2k-freebsd"
    ia32cap: str | None = None  # detected capability vector from CPUINFO (3.x only)
    ia32cap_env: str | None = None  # OPENSSL_ia32cap as set in the environment, if printed
    block_sizes: tuple[int, ...] = ()
    rows: tuple[SpeedRow, ...] = field(default_factory=tuple)

    def row(self, name: str) -> SpeedRow | None:
        """A row by cipher name, case-insensitively (`aes-128-gcm` matches `AES-128-GCM`)."""
        want = _norm(name)
        for r in self.rows:
            if _norm(r.name) == want:
                return r
        return None


def _norm(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def _value(token: str) -> float | None:
    m = _VALUE.match(token)
    if not m:
        return None
    return float(m.group(1)) * 1000.0  # both 'k' and plain values are in 1000s of bytes/s


def parse(text: str) -> SpeedResult:
    """Parse `openssl speed` stdout (stderr's `Doing ...` lines are ignored if mixed in)."""
    version: str | None = None
    cap: str | None = None
    cap_env: str | None = None
    sizes: tuple[int, ...] = ()
    rows: list[SpeedRow] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _V3.match(line)
        if m and version is None:
            version = m.group(1)
            continue
        m = _V1.match(line)
        if m and version is None and not sizes:
            version = m.group(2)
            continue
        m = _CPUINFO.match(line)
        if m:
            cap, cap_env = m.group(1), m.group(2)
            continue
        m = _HEADER.match(line)
        if m:
            sizes = tuple(int(s) for s in _SIZE.findall(m.group(1)))
            continue
        if not sizes or line.startswith(("+", "Doing ", "The 'numbers'")):
            continue
        tokens = line.split()
        if len(tokens) <= len(sizes):
            continue
        values = [_value(t) for t in tokens[-len(sizes):]]
        if any(v is None for v in values):
            continue
        name = " ".join(tokens[: -len(sizes)])
        speeds = {s: float(v) for s, v in zip(sizes, values, strict=True) if v is not None}
        rows.append(SpeedRow(name, speeds))
    return SpeedResult(version=version, ia32cap=cap, ia32cap_env=cap_env, block_sizes=sizes, rows=tuple(rows))


# a count is tried from its first digit only, at most 19 digits (tried from every digit, a long digit run
# cost quadratic time; more digits than an int64 would be a number int() refuses past 4300)
_COUNT = re.compile(r"(?<!\d)(\d{1,19}) (\S+(?: \S+)?)'s in (\d{1,19}(?:\.\d{1,19})?)s")


def parse_counts(stderr: str) -> list[tuple[int, str, float]]:
    """`print_result`'s stderr lines, `Doing ... : 230000 AES-128-GCM's in 0.99s` (apps/speed.c, "%d %s's
    in %.2fs"; 1.0.2's "%ld %s's in %.2fs"): (count, algorithm, seconds). In CPU-time mode (no -elapsed) the
    seconds are the CPU time the run got, so a share far below the requested time means a busy machine."""
    return [(int(m.group(1)), m.group(2), float(m.group(3))) for m in _COUNT.finditer(stderr)]
