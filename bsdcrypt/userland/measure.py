"""Before/after with `openssl speed`: CPU-time mode, interleaved rounds, median and spread, noisy flag.

CPU-time mode (no -elapsed) divides by the CPU time the run got, so a VPS whose neighbours take the
CPU still gives comparable figures; the CPU share itself (stderr's "N X's in T s" against the
requested seconds) says how busy the machine was. Rounds interleave before/after per cipher so that a
load change hits both sides alike. AES-128-CTR is what tor's relay cells use; AES-128-GCM what TLS
uses; ChaCha20-Poly1305 is the alternative when AES stays slow.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from bsdcrypt.hostapi import Host, sh_quote
from bsdcrypt.parsers import openssl_speed

CIPHERS = ("aes-128-gcm", "aes-128-ctr", "chacha20-poly1305")
BLOCK = 16384
NOISY_SHARE = 0.7  # a run that got less than this share of a CPU
NOISY_SPREAD = 0.25  # (max - min) / median above this


@dataclass
class Series:
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
    after_env: str
    ciphers: list[CipherResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def noisy(self) -> bool:
        for c in self.ciphers:
            for s in (c.before, c.after):
                if any(x < NOISY_SHARE for x in s.cpu_share) or (s.spread or 0) > NOISY_SPREAD:
                    return True
        return False


def command(openssl: str, cipher: str, env: str | None, seconds: int, old: bool) -> str:
    setting = f"OPENSSL_ia32cap={sh_quote(env)}; export OPENSSL_ia32cap" if env is not None else "unset OPENSSL_ia32cap"
    args = f"speed -evp {cipher}" if old else f"speed -seconds {seconds} -bytes {BLOCK} -evp {cipher}"
    child = f"ulimit -c 0 2>/dev/null; cd /tmp 2>/dev/null || cd /; {setting}; exec {sh_quote(openssl)} {args}"
    return f"( {child} ) </dev/null"


def run(
    host: Host,
    openssl: str,
    before_env: str | None,
    after_env: str,
    *,
    rounds: int = 3,
    seconds: int = 1,
    old: bool = False,
    ciphers: tuple[str, ...] = CIPHERS,
) -> Measurement:
    """`rounds` x (before, after) per cipher, interleaved; 1.0.2/1.1.0 (`old`) run their fixed 3 s sizes."""
    out = Measurement(rounds, seconds, before_env, after_env, [CipherResult(c) for c in ciphers])
    for r in range(rounds):
        for c in out.ciphers:
            order = ((c.before, before_env), (c.after, after_env))
            for series, env in order if r % 2 == 0 else order[::-1]:
                res = host.run(command(openssl, c.cipher, env, seconds, old), timeout=(seconds + 5) * 6 + 120)
                parsed = openssl_speed.parse(res.stdout.decode("utf-8", "replace"))
                row = parsed.row(c.cipher)
                if not res.ok or row is None:
                    out.failures.append(f"{c.cipher} ({'before' if series is c.before else 'after'}): exit {res.rc}")
                    continue
                series.bytes_per_s.append(row.bulk_bytes_per_s)
                counts = openssl_speed.parse_counts(res.stderr.decode("utf-8", "replace"))
                if counts and not old:
                    series.cpu_share.append(counts[-1][2] / seconds)
    return out
