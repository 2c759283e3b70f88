"""`openssl speed` on a host: THE one measurement of userland OpenSSL (`bench --userland` and
`bsdcrypt userland`).

CPU-time mode (no -elapsed) divides by the CPU time the run got, so a VPS whose neighbours take the
CPU still gives comparable figures; the CPU share itself (stderr's "N X's in T s" against the
requested seconds) says how busy the machine was. Rounds interleave the two settings per cipher
("before" and "after": OPENSSL_ia32cap set one way, then the other) so that a load change hits both
alike; each series gives a median and a spread, and a series too noisy to trust is named.

OpenSSL 1.1.1+ runs `-seconds S -bytes 16384` (one block size: the bulk figure); 1.0.2 and 1.1.0 know
neither option and run their fixed 3 s per block size ("old"). With `old=None` the first run finds
out: a failed modern command is tried again the old way, and the rest follow.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from bsdcrypt.hostapi import Host, sh_quote
from bsdcrypt.parsers import openssl_speed

BLOCK = 16384
NOISY_SHARE = 0.7  # a run that got less than this share of a CPU
NOISY_SPREAD = 0.25  # (max - min) / median above this


@dataclass
class Series:
    """One cipher under one setting: a figure (bulk bytes/s) and a CPU share per round."""

    bytes_per_s: list[float] = field(default_factory=list)
    cpu_share: list[float] = field(default_factory=list)  # CPU seconds / requested seconds, per run

    @property
    def median(self) -> float | None:
        return statistics.median(self.bytes_per_s) if self.bytes_per_s else None

    @property
    def spread(self) -> float | None:
        """(max - min) / median: 0.1 = the rounds differ by 10 % of the median."""
        m = self.median
        if not m or len(self.bytes_per_s) < 2:
            return None
        return (max(self.bytes_per_s) - min(self.bytes_per_s)) / m

    def noise(self) -> str | None:
        """Why this series is too noisy to trust, with its spread; None if it is not."""
        reasons = []
        spread = self.spread
        if spread is not None and spread > NOISY_SPREAD:
            reasons.append(f"over {NOISY_SPREAD * 100:.0f}%")
        if self.cpu_share and min(self.cpu_share) < NOISY_SHARE:
            reasons.append(f"a run got only {min(self.cpu_share) * 100:.0f}% of a CPU")
        if not reasons:
            return None
        runs = len(self.bytes_per_s)
        what = f"its {runs} runs spread {spread * 100:.0f}% of their median" if spread is not None else (
            f"{runs} run{'s' if runs != 1 else ''}, no spread")
        return f"{what} ({'; '.join(reasons)})"


@dataclass
class CipherResult:
    cipher: str
    before: Series = field(default_factory=Series)
    after: Series = field(default_factory=Series)

    @property
    def gain(self) -> float | None:
        b, a = self.before.median, self.after.median
        return a / b if a and b else None


@dataclass
class Measurement:
    rounds: int
    seconds: int
    before_env: str | None  # None: the variable unset
    after_env: str | None
    ciphers: list[CipherResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    version: str | None = None  # as `openssl speed` printed it
    old: bool = False  # ran the 1.0.2/1.1.0 way (no -seconds/-bytes)

    @property
    def noisy(self) -> bool:
        return bool(self.noisy_series())

    def noisy_series(self, names: tuple[str, str] = ("before", "after")) -> list[tuple[str, str, str]]:
        """(cipher, which setting, why) for every series too noisy to trust; `names` name the settings."""
        out = []
        for c in self.ciphers:
            for name, s in zip(names, (c.before, c.after), strict=True):
                why = s.noise()
                if why:
                    out.append((c.cipher, name, why))
        return out


def command(openssl: str, cipher: str, env: str | None, seconds: int, old: bool) -> str:
    """One `openssl speed -evp CIPHER` child, the variable set or unset explicitly (never inherited),
    no core dump, in /tmp, stdin closed."""
    setting = f"OPENSSL_ia32cap={sh_quote(env)}; export OPENSSL_ia32cap" if env is not None else "unset OPENSSL_ia32cap"
    args = f"speed -evp {cipher}" if old else f"speed -seconds {seconds} -bytes {BLOCK} -evp {cipher}"
    child = f"ulimit -c 0 2>/dev/null; cd /tmp 2>/dev/null || cd /; {setting}; exec {sh_quote(openssl)} {args}"
    return f"( {child} ) </dev/null"


def run(
    host: Host,
    openssl: str,
    before_env: str | None,
    after_env: str | None,
    *,
    rounds: int = 3,
    seconds: int = 1,
    old: bool | None = False,
    ciphers: tuple[str, ...],
    with_before: bool = True,
    old_rounds: int | None = None,
    progress: Callable[[str], None] | None = None,
    names: tuple[str, str] = ("before", "after"),
) -> Measurement:
    """`rounds` x (before, after) per cipher, interleaved (only "after" when not `with_before`);
    `old` None: find out from the first run, and then run `old_rounds` (if given) instead of `rounds`
    the old way (about 15 s a run). `progress` gets a line per run, named with `names`."""
    out = Measurement(rounds, seconds, before_env, after_env, [CipherResult(c) for c in ciphers])
    per_round = len(ciphers) * (2 if with_before else 1)
    done = 0
    r = 0
    while r < out.rounds:
        for c in out.ciphers:
            order = [(c.before, before_env, names[0]), (c.after, after_env, names[1])]
            if not with_before:
                order = order[1:]
            elif r % 2:
                order.reverse()
            for series, env, name in order:
                known = old
                ok, old = _one(host, openssl, c.cipher, env, seconds, old, series, out, name)
                if known is None and old and old_rounds is not None:
                    out.rounds = old_rounds
                done += 1
                if progress is not None:
                    got = f"{series.bytes_per_s[-1] / 1e6:,.0f} MB/s" if ok else "failed"
                    progress(f"openssl speed {done}/{out.rounds * per_round}: {c.cipher} ({name}), "
                             f"round {r + 1}/{out.rounds}: {got}")
        r += 1
    out.old = bool(old)
    return out


def _one(
    host: Host, openssl: str, cipher: str, env: str | None, seconds: int, old: bool | None,
    series: Series, out: Measurement, name: str,
) -> tuple[bool, bool | None]:
    """One run into `series`; returns whether it gave a figure, and what is known of `old` afterwards."""
    timeout = (seconds + 5) * 6 + 120
    res = host.run(command(openssl, cipher, env, seconds, bool(old)), timeout=timeout)
    parsed = openssl_speed.parse(res.stdout.decode("utf-8", "replace"))
    row = parsed.row(cipher)
    if (not res.ok or row is None) and old is None:  # 1.0.2/1.1.0: no -seconds, no -bytes
        res = host.run(command(openssl, cipher, env, seconds, True), timeout=3 * 6 * 6 + 120)
        parsed = openssl_speed.parse(res.stdout.decode("utf-8", "replace"))
        row = parsed.row(cipher)
        if res.ok and row is not None:
            old = True
    elif res.ok and row is not None and old is None:
        old = False
    out.version = out.version or parsed.version
    if not res.ok or row is None:
        out.failures.append(f"{cipher} ({name}): exit {res.rc}")
        return False, old
    series.bytes_per_s.append(row.bulk_bytes_per_s)
    counts = openssl_speed.parse_counts(res.stderr.decode("utf-8", "replace"))
    if counts and not old:
        series.cpu_share.append(counts[-1][2] / seconds)
    return True, old
