"""What a bench is asked to do and what it found: parameters, step names, errors, results, compare."""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from bsdcrypt.errors import BsdcryptError
from bsdcrypt.interrupts import Interrupted

LABEL = "bsdcrypt-bench"
STATE_FILE = "/var/run/bsdcrypt-bench.units"
MIB = 1024 * 1024
RECORD_SCHEMA = 1

# Steps: every failure names one of these.
ST_SYSTEM = "preflight: system"
ST_ROOT = "preflight: root"
ST_FIO = "preflight: fio"
ST_GELI = "preflight: GELI"
ST_SYSCTL = "preflight: host facts"
ST_SWAP = "preflight: swap"
ST_MEMORY = "preflight: memory"
ST_LEFTOVERS = "preflight: leftovers"
ST_MDLIST = "list md devices"
ST_CREATE = "create md"
ST_STATE = "record md in state file"
ST_ONETIME = "geli onetime"
ST_GELI_LIST = "geli list"
ST_DETACH = "geli detach"
ST_DESTROY = "destroy md"


class BenchError(BsdcryptError):
    """A bench step failed; `step` names it, `cleanup` says what cleanup did."""

    def __init__(self, step: str, message: str, cleanup: CleanupReport | None = None) -> None:
        self.step = step
        self.detail = message
        self.cleanup = cleanup
        super().__init__(message)

    def __str__(self) -> str:
        text = f"bench step '{self.step}' failed: {self.detail}"
        if self.cleanup is not None:
            text += f"; {self.cleanup.summary()}"
        return text


class BenchInterrupted(Interrupted):
    """Ctrl-C or SIGTERM during a bench; raised after cleanup, naming the step it hit.

    `error` is set when the interrupt arrived while cleaning up after a failed step: the
    interrupt wins (exit 130), and the message still says what failed.
    """

    def __init__(
        self,
        reason: str,
        step: str | None = None,
        cleanup: CleanupReport | None = None,
        error: str | None = None,
    ) -> None:
        super().__init__("SIGTERM" if reason == "SIGTERM" else "SIGINT", reason)
        self.reason = reason
        self.step = step
        self.cleanup = cleanup
        self.error = error

    def __str__(self) -> str:
        text = f"bench interrupted ({self.reason})"
        if self.error:
            text += f" while cleaning up after step '{self.step}' failed: {self.error}"
        elif self.step:
            text += f" during step '{self.step}'"
        if self.cleanup is not None:
            text += f"; {self.cleanup.summary()}"
        return text


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class BenchParams:
    size_mib: int = 1024  # md size; swap-backed, so it costs this much RAM while written
    keylen: int = 128  # AES-XTS key length: 128 or 256
    sectorsize: int = 4096  # GELI sector size (geli onetime -s)
    ealgo: str = "AES-XTS"
    bs: str = "1m"
    iodepth: int = 16
    numjobs: int | None = None  # None: hw.ncpu
    runtime_s: int = 10
    ioengine: str = "posixaio"  # FreeBSD has no libaio
    directions: tuple[str, ...] = ("write", "read")
    repeat: int = 1
    ceiling: bool = True  # also measure the bare md device

    def validate(self) -> None:
        def bad(msg: str) -> BenchError:
            return BenchError("parameters", msg)

        if self.keylen not in (128, 256):
            raise bad(f"--keylen must be 128 or 256 for AES-XTS, not {self.keylen}")
        if self.ealgo.upper() not in ("AES-XTS", "AES-CBC"):
            raise bad(f"unsupported GELI algorithm {self.ealgo!r} (AES-XTS or AES-CBC)")
        if self.sectorsize < 512 or self.sectorsize > 65536 or self.sectorsize & (self.sectorsize - 1):
            raise bad(f"--sectorsize must be a power of two from 512 to 65536, not {self.sectorsize}")
        if self.size_mib < 64:
            raise bad("--size must be at least 64 MiB")
        if self.runtime_s < 1 or self.iodepth < 1 or self.repeat < 1:
            raise bad("--runtime, --iodepth and --repeat must be at least 1")
        if self.numjobs is not None and self.numjobs < 1:
            raise bad("--numjobs must be at least 1")
        if not re.fullmatch(r"[0-9]+[kKmM]?", self.bs):
            raise bad(f"--bs must look like 1m, 128k or 4096, not {self.bs!r}")
        if not re.fullmatch(r"[a-z0-9_]+", self.ioengine):
            raise bad(f"--ioengine {self.ioengine!r} is not a fio engine name")
        if not self.directions or any(d not in ("write", "read") for d in self.directions):
            raise bad("directions must be write and/or read")


@dataclass
class HostFacts:
    """What a bench record says about the host.

    Filled from the status assessment by `from_status`; when the probe fails, `measure()` fills
    release/CPU/ncpu from its own sysctl preflight and leaves the driver state "unknown".
    """

    hostname: str | None = None
    release: str | None = None
    arch: str | None = None
    cpu_model: str | None = None
    ncpu: int | None = None
    physmem: int | None = None
    cpu_aesni: bool | None = None
    driver: str | None = None  # aesni, armv8crypto
    driver_state: str = "unknown"  # builtin, loaded, not-loaded, no-device, missing, unknown
    driver_compiled_in: bool | None = None

    @classmethod
    def from_status(cls, status: Any) -> HostFacts:
        """From a `bsdcrypt.status.Status` (duck-typed so this module never imports assess)."""
        os_ = getattr(status, "os", None)
        cpu = getattr(status, "cpu", None)
        drv = getattr(status, "driver", None)
        return cls(
            hostname=getattr(status, "host", None),
            release=getattr(os_, "release", None),
            arch=getattr(os_, "arch", None),
            cpu_model=getattr(cpu, "model", None),
            cpu_aesni=getattr(cpu, "aesni", None),
            driver=getattr(drv, "name", None),
            driver_state=getattr(drv, "state", "unknown") or "unknown",
            driver_compiled_in=getattr(drv, "compiled_in", None),
        )


def fio_args(
    params: BenchParams, filename: str, direction: str, numjobs: int, size: str | None = None
) -> list[str]:
    """The fio command line for one direction (also run for real by the tests on a file)."""
    args = [
        "fio",
        f"--name=bsdcrypt-{direction}",
        f"--filename={filename}",
        f"--rw={direction}",
        f"--bs={params.bs}",
        f"--ioengine={params.ioengine}",
        f"--iodepth={params.iodepth}",
        f"--numjobs={numjobs}",
        "--group_reporting",
        "--time_based",
        f"--runtime={params.runtime_s}",
        "--output-format=json",
    ]
    if direction == "write":
        args.append("--end_fsync=1")
    if size is not None:
        args.append(f"--size={size}")
    return args

# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Sample:
    bw_bytes: float
    iops: float
    runtime_ms: int


@dataclass
class Measurement:
    target: str  # "geli" or "md"
    direction: str  # "write" or "read"
    samples: list[Sample] = field(default_factory=list)

    @property
    def median_bw(self) -> float:
        return statistics.median(s.bw_bytes for s in self.samples)

    @property
    def median_mib_s(self) -> float:
        return self.median_bw / MIB

    @property
    def median_iops(self) -> float:
        return statistics.median(s.iops for s in self.samples)

    @property
    def single(self) -> bool:
        return len(self.samples) == 1

    @property
    def spread_pct(self) -> float | None:
        """(max - min) / median in percent; None for a single run."""
        if len(self.samples) < 2 or self.median_bw == 0:
            return None
        bws = [s.bw_bytes for s in self.samples]
        return 100.0 * (max(bws) - min(bws)) / self.median_bw

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "direction": self.direction,
            "runs": len(self.samples),
            "median_bytes_per_s": round(self.median_bw, 1),
            "median_mib_per_s": round(self.median_mib_s, 1),
            "median_iops": round(self.median_iops, 1),
            "spread_pct": None if self.spread_pct is None else round(self.spread_pct, 1),
            "samples": [asdict(s) for s in self.samples],
        }


@dataclass
class CleanupReport:
    removed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (device, why)
    # `bench --cleanup` only: leftovers it would not touch (a bench still running, an owner it
    # cannot check), each with what to do
    refused: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.refused

    def summary(self) -> str:
        parts: list[str] = []
        if self.failed:
            left = ", ".join(f"{dev} ({why})" for dev, why in self.failed)
            parts.append(f"cleanup could NOT remove: {left}; remove by hand or run `bsdcrypt bench cleanup`")
            if self.removed:
                parts.append("removed " + ", ".join(self.removed))
        elif self.removed:
            parts.append("cleanup removed " + ", ".join(self.removed))
        if self.refused:
            parts.append("left alone: " + "; ".join(f"{dev}: {why}" for dev, why in self.refused))
        return "; ".join(parts) or "nothing to clean up"


@dataclass
class CipherSpeed:
    cipher: str
    bytes_per_s: float | None  # bulk (largest block) throughput
    masked_bytes_per_s: float | None = None  # with AES-NI/PCLMULQDQ masked via OPENSSL_ia32cap


@dataclass
class UserlandResult:
    openssl_version: str | None
    ciphers: list[CipherSpeed]  # each figure the median of `rounds` runs
    prefer: str | None
    advice: str
    rounds: int = 1
    warnings: list[str] = field(default_factory=list)  # a figure too noisy to trust, a run that failed


@dataclass
class BenchResult:
    host: HostFacts
    params: BenchParams
    numjobs: int
    fio_version: str | None = None
    crypto: str | None = None  # GELI "Crypto:" of the run: hardware/software/accelerated software
    geli_algorithm: str | None = None
    geli_keylength: int | None = None
    measurements: list[Measurement] = field(default_factory=list)
    started: str = ""
    finished: str = ""
    warnings: list[str] = field(default_factory=list)
    cleanup: CleanupReport = field(default_factory=CleanupReport)
    leftovers_removed: list[str] = field(default_factory=list)  # a crashed run's devices removed first
    context: str | None = None  # e.g. "enable --bench: before"

    def get(self, target: str, direction: str) -> Measurement | None:
        for m in self.measurements:
            if m.target == target and m.direction == direction:
                return m
        return None

    @property
    def accelerated(self) -> bool | None:
        if self.crypto is None:
            return None
        return self.crypto in ("accelerated software", "hardware")

    def ceiling_fraction(self, direction: str) -> float | None:
        """GELI throughput as a fraction of the bare md ceiling."""
        g, m = self.get("geli", direction), self.get("md", direction)
        if g is None or m is None or m.median_bw == 0:
            return None
        return g.median_bw / m.median_bw

    def to_record(self) -> dict[str, Any]:
        return {
            "schema": RECORD_SCHEMA,
            "kind": "bsdcrypt-bench",
            "context": self.context,
            "started": self.started,
            "finished": self.finished,
            "host": asdict(self.host),
            "crypto_mode": self.crypto,
            "accelerated": self.accelerated,
            "geli": {"algorithm": self.geli_algorithm, "key_length": self.geli_keylength},
            "fio_version": self.fio_version,
            "parameters": {**asdict(self.params), "numjobs": self.numjobs},
            "results": [m.to_dict() for m in self.measurements],
            "ceiling_fraction": {
                d: (None if (f := self.ceiling_fraction(d)) is None else round(f, 3))
                for d in self.params.directions
            },
            "warnings": list(self.warnings),
            "cleanup": {"removed": self.cleanup.removed, "failed": [list(f) for f in self.cleanup.failed]},
            "leftovers_removed": list(self.leftovers_removed),
        }


def userland_record(u: UserlandResult, host: HostFacts, started: str, finished: str) -> dict[str, Any]:
    """The saved record of `bench --userland`: a kind of its own (no GELI, md or fio figures)."""
    return {
        "schema": RECORD_SCHEMA,
        "kind": "bsdcrypt-bench-userland",
        "started": started,
        "finished": finished,
        "host": asdict(host),
        "openssl_version": u.openssl_version,
        "ciphers": [asdict(c) for c in u.ciphers],
        "prefer": u.prefer,
        "advice": u.advice,
        "rounds": u.rounds,
        "warnings": list(u.warnings),
    }


@dataclass
class Speedup:
    """compare(before, after): per direction, after/before of the GELI medians."""

    ratio: dict[str, float | None]
    before_mib_s: dict[str, float | None]
    after_mib_s: dict[str, float | None]
    ceiling_mib_s: dict[str, float | None]
    before_crypto: str | None
    after_crypto: str | None
    note: str = ""
    no_before: str | None = None  # why there is no "before" (None when there is one)

    def to_dict(self) -> dict[str, Any]:
        def r(d: dict[str, float | None], nd: int) -> dict[str, float | None]:
            return {k: None if v is None else round(v, nd) for k, v in d.items()}

        return {
            "ratio": r(self.ratio, 2),
            "before_mib_per_s": r(self.before_mib_s, 1),
            "after_mib_per_s": r(self.after_mib_s, 1),
            "ceiling_mib_per_s": r(self.ceiling_mib_s, 1),
            "before_crypto": self.before_crypto,
            "after_crypto": self.after_crypto,
            "no_before": self.no_before,
            "note": self.note,
        }


# Why there is no "before" measurement: compare(None, after, why) says which.
NO_BEFORE_COMPILED_IN = "the crypto driver is compiled into this kernel and cannot be unloaded"
NO_BEFORE_LOADED = (
    "the driver was already loaded (kldload) before this run; `kldunload` it first to measure a 'before'"
)
NO_BEFORE_UNKNOWN = "no reason given"


def no_before_reason(host: HostFacts) -> str:
    """The reason implied by the host facts alone (compiled in, already loaded, or unknown)."""
    if host.driver_compiled_in or host.driver_state == "builtin":
        return NO_BEFORE_COMPILED_IN
    if host.driver_state == "loaded":
        return NO_BEFORE_LOADED
    return NO_BEFORE_UNKNOWN


def compare(before: BenchResult | None, after: BenchResult, why_no_before: str | None = None) -> Speedup:
    """Speedup of `after` over `before`.

    `before` is None when there is no "before": the driver is compiled in and cannot be
    unloaded, it was already loaded, the "before" measurement failed, or nothing was loaded.
    Pass the actual reason as `why_no_before` (without it, it is inferred from `after.host`:
    compiled in, already loaded, or unknown); the ratio is then None and the note gives the
    reason; report the absolute figure against the md ceiling instead.
    """
    ratio: dict[str, float | None] = {}
    b_mib: dict[str, float | None] = {}
    a_mib: dict[str, float | None] = {}
    c_mib: dict[str, float | None] = {}
    for d in after.params.directions:
        a = after.get("geli", d)
        b = before.get("geli", d) if before is not None else None
        c = after.get("md", d) or (before.get("md", d) if before is not None else None)
        a_mib[d] = a.median_mib_s if a else None
        b_mib[d] = b.median_mib_s if b else None
        c_mib[d] = c.median_mib_s if c else None
        ratio[d] = a.median_bw / b.median_bw if a and b and b.median_bw else None
    no_before: str | None = None
    if before is None:
        no_before = why_no_before or no_before_reason(after.host)
        note = f"no 'before' measurement: {no_before}; showing the absolute GELI figure against the md ceiling"
    elif before.crypto == after.crypto:
        note = f"GELI used the same crypto path before and after ({after.crypto}); the change had no effect"
    else:
        note = f"GELI crypto path: {before.crypto} -> {after.crypto}"
    return Speedup(
        ratio, b_mib, a_mib, c_mib, before.crypto if before else None, after.crypto, note, no_before
    )
