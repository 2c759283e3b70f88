"""`bsdcrypt bench`: GELI on a swap-backed md(4) device, measured with fio.

Every action on the host is one `Host.run` call, named by a step, so a failure says
which step failed. The sequence for one measurement of one target:

    mdconfig -a -t swap -s SIZEm -L bsdcrypt-bench      -> prints "mdN"
    geli onetime -e AES-XTS -l 128 -s 4096 mdN          (target "geli" only)
    geli list mdN.eli                                   -> the Crypto: field
    fio ... --filename=/dev/mdN.eli --rw=write ...      (then --rw=read)
    geli detach mdN.eli                                 (target "geli" only)
    mdconfig -d -u N

The target "md" (no GELI) is the ceiling: what the same md device does without crypto.

Safety rules, enforced in one place (`_Devices`):
* only md units this run created (the name mdconfig printed, `^md[0-9]+$`, not in the
  list taken before) are ever named in a command, and `.eli` only on top of those;
* cleanup runs on success, on any failing step, on KeyboardInterrupt and on SIGTERM
  (turned into an exception while a bench runs); it retries with force, verifies with
  `mdconfig -l`/`test -c`, and reports what could not be removed;
* devices carry the md label `bsdcrypt-bench` (mdconfig -L) and are also listed in
  /var/run/bsdcrypt-bench.units with the boot time, so the next run finds leftovers of
  a crashed run (and `bench --cleanup` removes them) without guessing about others' md.
"""

from __future__ import annotations

import functools
import re
import shlex
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from bsdcrypt.errors import BsdcryptError
from bsdcrypt.facts import GeliProvider
from bsdcrypt.host import Host, RunResult
from bsdcrypt.parsers import fio as fio_parser
from bsdcrypt.parsers import openssl_speed
from bsdcrypt.parsers.geli import parse_geli_list
from bsdcrypt.parsers.mdconfig import MD_NAME, MdEntry, parse_mdconfig_list
from bsdcrypt.parsers.swapinfo import parse_swapinfo_avail_kib
from bsdcrypt.parsers.sysctl import parse_boottime, parse_sysctl

LABEL = "bsdcrypt-bench"
STATE_FILE = "/var/run/bsdcrypt-bench.units"
MIB = 1024 * 1024
RECORD_SCHEMA = 1
RETRY_DELAY_S = 1.0  # between a plain and a forced detach/destroy in cleanup

# Steps: every failure names one of these.
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


class BenchInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a bench; raised after cleanup, naming the step it hit."""

    def __init__(self, reason: str, step: str | None = None, cleanup: CleanupReport | None = None) -> None:
        self.reason = reason
        self.step = step
        self.cleanup = cleanup
        super().__init__(reason)

    def __str__(self) -> str:
        text = f"bench interrupted ({self.reason})"
        if self.step:
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

    TODO(assess): filled from `bsdcrypt.assess` (Status) by `from_status` when the lead's
    assessment is importable; `measure()` otherwise fills release/CPU/ncpu from its own
    sysctl preflight and leaves the driver state "unknown".
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

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        if self.failed:
            left = ", ".join(f"{dev} ({why})" for dev, why in self.failed)
            return f"cleanup could NOT remove: {left}; remove by hand or run `bsdcrypt bench --cleanup`"
        if self.removed:
            return "cleanup removed " + ", ".join(self.removed)
        return "nothing to clean up"


@dataclass
class CipherSpeed:
    cipher: str
    bytes_per_s: float | None  # bulk (largest block) throughput
    masked_bytes_per_s: float | None = None  # with AES-NI/PCLMULQDQ masked via OPENSSL_ia32cap


@dataclass
class UserlandResult:
    openssl_version: str | None
    ciphers: list[CipherSpeed]
    prefer: str | None
    advice: str


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
    userland: UserlandResult | None = None

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
            "userland": None if self.userland is None else asdict(self.userland),
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


def compare(before: BenchResult | None, after: BenchResult) -> Speedup:
    """Speedup of `after` over `before`.

    `before` is None when no "before" can be measured on this kernel (the driver is
    compiled in and cannot be unloaded): the ratio is then None and the note says so;
    report the absolute figure against the md ceiling instead.
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
    if before is None:
        note = (
            "no 'before' can be measured on this kernel (the crypto driver is compiled in and "
            "cannot be unloaded); showing the absolute GELI figure against the md ceiling"
        )
    elif before.crypto == after.crypto:
        note = f"GELI used the same crypto path before and after ({after.crypto}); the change had no effect"
    else:
        note = f"GELI crypto path: {before.crypto} -> {after.crypto}"
    return Speedup(ratio, b_mib, a_mib, c_mib, before.crypto if before else None, after.crypto, note)


# --------------------------------------------------------------------------- signals


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While a bench runs, SIGTERM raises BenchInterrupted like Ctrl-C raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _handler(signum: int, frame: FrameType | None) -> None:
        raise BenchInterrupted("SIGTERM")

    old = signal.signal(signal.SIGTERM, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """During cleanup, Ctrl-C/SIGTERM are recorded, not raised, so cleanup is not cut short."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def _record(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    old_int = signal.signal(signal.SIGINT, _record)
    old_term = signal.signal(signal.SIGTERM, _record)
    try:
        yield got
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


# --------------------------------------------------------------------------- the session



def _first_line(res: RunResult) -> str:
    for blob in (res.stderr, res.stdout):
        text = blob.decode("utf-8", errors="replace").strip()
        if text:
            return text.splitlines()[-1] if len(text.splitlines()) > 3 else " ".join(text.split())
    return f"exit status {res.rc}"


class _Devices:
    """The md units and .eli providers this run created: the only devices it may name."""

    def __init__(self) -> None:
        self.before: set[str] = set()
        self.md: list[str] = []  # alive, created by this run (or adopted leftovers)
        self.eli: list[str] = []  # alive GELI providers on top of those

    def adopt_md(self, name: str) -> str:
        if not MD_NAME.match(name):
            raise BenchError(ST_CREATE, f"mdconfig printed {name!r}, which is not an md(4) unit name")
        if name in self.before:
            raise BenchError(ST_CREATE, f"mdconfig printed {name}, which existed before this run")
        self.md.append(name)
        return name

    def md_ok(self, name: str) -> str:
        if not MD_NAME.match(name) or name not in self.md:
            raise BenchError("device check", f"refusing to touch {name!r}: not an md unit this run created")
        return name

    def eli_ok(self, name: str) -> str:
        base = name[: -len(".eli")] if name.endswith(".eli") else ""
        if not base or base not in self.md:
            raise BenchError("device check", f"refusing to touch {name!r}: not a GELI provider on our md")
        return name


class BenchSession:
    """One bench on one host: runs steps, tracks devices, cleans up."""

    def __init__(
        self, host: Host, params: BenchParams, progress: Callable[[str], None] | None = None
    ) -> None:
        self.host = host
        self.params = params
        self.devices = _Devices()
        self.step: str | None = None
        self.progress = progress or (lambda _msg: None)
        self.boottime: int | None = None
        self.label_supported = True
        self.warnings: list[str] = []
        self.interrupted: str | None = None  # an interrupt arrived while cleanup ran

    # -- running commands
    def run(self, step: str, command: str, *, timeout: float | None = 120.0) -> RunResult:
        self.step = step
        try:
            return self.host.run(command, timeout=timeout)
        except BsdcryptError as exc:  # HostError: unreachable, timed out
            raise BenchError(step, str(exc)) from exc

    def must(self, step: str, command: str, *, timeout: float | None = 120.0) -> RunResult:
        res = self.run(step, command, timeout=timeout)
        if not res.ok:
            raise BenchError(step, f"`{command}` failed: {_first_line(res)}")
        return res

    # -- preflight
    def preflight(self) -> dict[str, str]:
        res = self.must(ST_ROOT, "id -u")
        if res.stdout.decode(errors="replace").strip() != "0":
            raise BenchError(ST_ROOT, "bench creates md(4) and GELI devices and must run as root")
        res = self.run(ST_FIO, "fio --version")
        if not res.ok:
            raise BenchError(ST_FIO, "fio is not installed (install it with `pkg install fio`)")
        fio_version = res.stdout.decode(errors="replace").strip() or "unknown"
        geli_check = "command -v geli && { kldstat -q -m g_eli || test -e /boot/kernel/geom_eli.ko; }"
        res = self.run(ST_GELI, geli_check)
        if not res.ok:
            raise BenchError(ST_GELI, "GELI is not available (no geli(8), or no g_eli class/geom_eli.ko)")
        oids = (
            "kern.hostname kern.osrelease hw.machine_arch hw.model hw.ncpu hw.physmem hw.pagesize "
            "vm.stats.vm.v_free_count vm.stats.vm.v_inactive_count kern.boottime"
        )
        # sysctl exits 1 when one OID is unknown but prints the others.
        facts = parse_sysctl(self.run(ST_SYSCTL, f"sysctl {oids}").stdout.decode(errors="replace"))
        self.boottime = parse_boottime(facts.get("kern.boottime"))
        swap_res = self.run(ST_SWAP, "swapinfo -k")
        swap_kib = parse_swapinfo_avail_kib(swap_res.stdout.decode(errors="replace")) if swap_res.ok else 0
        self._check_memory(facts, swap_kib)
        facts["fio_version"] = fio_version
        return facts

    def _check_memory(self, facts: dict[str, str], swap_kib: int) -> None:
        try:
            page = int(facts.get("hw.pagesize", "4096"))
            free = int(facts["vm.stats.vm.v_free_count"])
            free += int(facts.get("vm.stats.vm.v_inactive_count", "0"))
        except (KeyError, ValueError):
            self.warnings.append("could not read free memory (vm.stats.vm.v_free_count); size not checked")
            return
        ram = free * page
        need = self.params.size_mib * MIB
        reserve = 256 * MIB
        self.step = ST_MEMORY
        if need + reserve > ram + swap_kib * 1024:
            raise BenchError(
                ST_MEMORY,
                f"an md of {self.params.size_mib} MiB needs that much memory; free RAM is "
                f"{ram // MIB} MiB and free swap {swap_kib // 1024} MiB: use a smaller --size",
            )
        if need + reserve > ram:
            self.warnings.append(
                f"--size {self.params.size_mib} MiB exceeds free RAM ({ram // MIB} MiB): the md will page "
                "to swap and the figures will measure swap I/O, not crypto"
            )

    # -- md bookkeeping
    def list_md(self, step: str = ST_MDLIST) -> list[MdEntry]:
        return parse_mdconfig_list(self.must(step, "mdconfig -l -v").stdout.decode(errors="replace"))

    def read_state(self) -> list[str]:
        """md units from the state file that belong to this boot."""
        res = self.run(ST_LEFTOVERS, f"cat {STATE_FILE}")
        if not res.ok:
            return []
        units: list[str] = []
        for line in res.stdout.decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 2 and MD_NAME.match(parts[1]) and self.boottime is not None:
                if parts[0] == str(self.boottime):
                    units.append(parts[1])
        return units

    def write_state(self) -> None:
        if self.devices.md and self.boottime is not None:
            body = "".join(f"{self.boottime} {m}\\n" for m in self.devices.md)
            cmd = f"umask 022; printf {shlex.quote(body)} > {STATE_FILE}"
        else:
            cmd = f"rm -f {STATE_FILE}"
        res = self.run(ST_STATE, cmd)
        if not res.ok:
            self.warnings.append(f"could not update {STATE_FILE}: {_first_line(res)}")

    def find_leftovers(self) -> list[str]:
        listed = self.list_md(ST_LEFTOVERS)
        names = {e.name for e in listed}
        ours = {e.name for e in listed if e.label == LABEL}
        swap = {e.name for e in listed if e.type in (None, "swap")}
        ours |= {m for m in self.read_state() if m in names and m in swap}
        return sorted(ours, key=lambda n: int(n[2:]))

    # -- device lifecycle
    def create_md(self) -> str:
        size = f"{self.params.size_mib}m"
        listed = self.list_md()
        self.devices.before = {e.name for e in listed}
        base = f"mdconfig -a -t swap -s {size}"
        if self.label_supported:
            res = self.run(ST_CREATE, f"{base} -L {LABEL}")
            err = res.stderr.decode(errors="replace")
            if not res.ok and ("illegal option" in err or "usage:" in err):
                self.label_supported = False  # mdconfig before -L: rely on the state file
                res = self.run(ST_CREATE, base)
        else:
            res = self.run(ST_CREATE, base)
        if not res.ok:
            raise BenchError(ST_CREATE, f"`{base}` failed: {_first_line(res)}")
        name = res.stdout.decode(errors="replace").strip()
        md = self.devices.adopt_md(name)
        self.write_state()
        self.progress(f"created {md} ({size}, swap-backed)")
        return md

    def attach_geli(self, md: str) -> tuple[str, GeliProvider]:
        md = self.devices.md_ok(md)
        p = self.params
        self.must(ST_ONETIME, f"geli onetime -e {shlex.quote(p.ealgo)} -l {p.keylen} -s {p.sectorsize} {md}")
        eli = f"{md}.eli"
        self.devices.eli.append(eli)
        res = self.must(ST_GELI_LIST, f"geli list {self.devices.eli_ok(eli)}")
        info = next(iter(parse_geli_list(res.stdout.decode(errors="replace"))), GeliProvider(eli))
        self.progress(f"attached {eli}: {info.encryption} {info.key_length}, Crypto: {info.crypto}")
        return eli, info

    def detach_geli(self, eli: str, force: bool = False) -> None:
        eli = self.devices.eli_ok(eli)
        self.must(ST_DETACH, f"geli detach {'-f ' if force else ''}{eli}")
        self.devices.eli.remove(eli)

    def destroy_md(self, md: str, force: bool = False) -> None:
        md = self.devices.md_ok(md)
        self.must(ST_DESTROY, f"mdconfig -d -u {md[2:]}{' -o force' if force else ''}")
        self.devices.md.remove(md)
        self.write_state()

    def run_fio(self, device: str, direction: str, numjobs: int) -> fio_parser.FioDirection:
        step = f"fio {direction} on {device}"
        if device.endswith(".eli"):
            self.devices.eli_ok(device)
        else:
            self.devices.md_ok(device)
        argv = fio_args(self.params, f"/dev/{device}", direction, numjobs)
        # exec: an interrupted ssh/sh takes fio with it instead of leaving it holding the device
        res = self.run(step, "exec " + shlex.join(argv), timeout=self.params.runtime_s + 180.0)
        out = res.stdout.decode("utf-8", errors="replace")
        try:
            parsed = fio_parser.parse(out)
        except fio_parser.FioParseError as exc:
            why = _first_line(res) if not res.ok else str(exc)
            raise BenchError(step, f"fio failed: {why}") from exc
        if parsed.errors:
            raise BenchError(step, f"fio reported job errors {parsed.errors}: {_first_line(res)}")
        d = parsed.direction(direction)
        if d is None or d.bw_bytes <= 0:
            raise BenchError(step, "fio moved no data")
        self.progress(f"{direction} on {device}: {d.mib_per_s:.0f} MiB/s")
        return d

    # -- cleanup
    def cleanup(self) -> CleanupReport:
        """Detach our GELI providers and destroy our md units; retry with force; verify."""
        report = CleanupReport()
        with signals_deferred() as got:
            self._adopt_unrecorded()
            for eli in list(self.devices.eli):
                self._remove(report, eli, functools.partial(self._detach_forced, eli), self.devices.eli)
            for md in list(reversed(self.devices.md)):
                self._remove(report, md, functools.partial(self._destroy_forced, md), self.devices.md)
            self._verify(report)
        if got:
            self.interrupted = "SIGTERM" if signal.SIGTERM in got else "Ctrl-C"
        return report

    def _note(self, exc: BaseException) -> None:
        """An interrupt that cleanup swallowed to finish its work; re-raised afterwards."""
        if isinstance(exc, KeyboardInterrupt) and self.interrupted is None:
            self.interrupted = exc.reason if isinstance(exc, BenchInterrupted) else "Ctrl-C"

    def _adopt_unrecorded(self) -> None:
        """Devices a step created before it could report them (interrupted mid-command)."""
        try:
            if self.step == ST_CREATE and self.label_supported:
                # mdconfig may have created the unit and been interrupted before we read its
                # name: ours are the labelled units that did not exist before this run.
                known = self.devices.before | set(self.devices.md)
                for e in self.list_md("cleanup: find unrecorded md"):
                    if e.label == LABEL and e.name not in known:
                        self.devices.md.append(e.name)
            for md in list(self.devices.md):
                eli = f"{md}.eli"
                if eli in self.devices.eli:
                    continue
                if self.run("cleanup: find unrecorded GELI", f"test -c /dev/{eli}").ok:
                    self.devices.eli.append(eli)
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)
            return

    def _gone(self, dev: str) -> bool:
        try:
            if dev.endswith(".eli"):
                return not self.run("verify cleanup", f"test -c /dev/{dev}").ok
            return dev not in {e.name for e in self.list_md("verify cleanup")}
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)
            return False

    def _detach_forced(self, eli: str, force: bool) -> None:
        self.detach_geli(eli, force=force)

    def _destroy_forced(self, md: str, force: bool) -> None:
        self.destroy_md(md, force=force)

    def _remove(
        self, report: CleanupReport, dev: str, action: Callable[[bool], None], tracked: list[str]
    ) -> None:
        why = ""
        for force in (False, True):
            try:
                action(force)
                report.removed.append(dev)
                return
            except BenchError as exc:
                why = exc.detail
            except (Exception, KeyboardInterrupt) as exc:  # keep cleaning whatever happens
                self._note(exc)
                why = f"{type(exc).__name__}: {exc}"
            if dev not in tracked:  # removed; what failed came after (e.g. the state file)
                report.removed.append(dev)
                return
            if not force:
                time.sleep(RETRY_DELAY_S)  # a device fio just let go of may need a moment
        if self._gone(dev):  # e.g. an interrupted detach that had in fact completed
            tracked.remove(dev)
            report.removed.append(dev)
            return
        report.failed.append((dev, why))

    def _verify(self, report: CleanupReport) -> None:
        for dev, why in list(report.failed):  # gone after all, e.g. with its md forced away
            if self._gone(dev):
                report.failed.remove((dev, why))
                report.removed.append(dev)
                for tracked in (self.devices.eli, self.devices.md):
                    if dev in tracked:
                        tracked.remove(dev)
        failed = {d for d, _ in report.failed}
        try:
            alive = {e.name for e in self.list_md("verify cleanup")}
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)
            for dev in report.removed:
                report.failed.append((dev, f"could not verify removal: {exc}"))
            return
        for dev in list(report.removed):
            base = dev[: -len(".eli")] if dev.endswith(".eli") else dev
            if dev.endswith(".eli"):
                try:
                    still = self.run("verify cleanup", f"test -c /dev/{dev}").ok
                except (Exception, KeyboardInterrupt) as exc:
                    self._note(exc)
                    still = True
            else:
                still = base in alive
            if still and dev not in failed:
                report.removed.remove(dev)
                report.failed.append((dev, "still present after removal"))


# --------------------------------------------------------------------------- public API


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _guarded(session: BenchSession, body: Callable[[], Any]) -> tuple[Any, CleanupReport]:
    """Run `body`; on any exit clean up, and re-raise naming the step."""
    with sigterm_raises():
        try:
            value = body()
        except BenchError as exc:
            exc.cleanup = session.cleanup()
            raise
        except KeyboardInterrupt as exc:
            reason = exc.reason if isinstance(exc, BenchInterrupted) else "Ctrl-C"
            raise BenchInterrupted(reason, session.step, session.cleanup()) from exc
        except BaseException as exc:
            failed_step = session.step or "bench"
            raise BenchError(failed_step, f"{type(exc).__name__}: {exc}", session.cleanup()) from exc
        step = session.step
        report = session.cleanup()
        if session.interrupted:
            raise BenchInterrupted(session.interrupted, step, report)
        return value, report


def measure(
    host: Host,
    params: BenchParams,
    facts: HostFacts | None = None,
    progress: Callable[[str], None] | None = None,
) -> BenchResult:
    """Run the GELI-on-md benchmark on `host` and return the numbers.

    Raises BenchError (naming the failing step; cleanup already done and reported in
    `.cleanup`) or BenchInterrupted (Ctrl-C/SIGTERM; likewise cleaned up).
    """
    params.validate()
    session = BenchSession(host, params, progress)
    started = _now()

    def body() -> BenchResult:
        hf = facts or HostFacts()
        sysctl = session.preflight()
        leftovers = session.find_leftovers()
        if leftovers:
            session.step = ST_LEFTOVERS
            raise BenchError(
                ST_LEFTOVERS,
                f"found {', '.join(leftovers)} left by an interrupted bsdcrypt bench; "
                "remove them with `bsdcrypt bench --cleanup`",
            )
        _fill_facts(hf, sysctl)
        numjobs = params.numjobs or hf.ncpu or 1
        result = BenchResult(host=hf, params=params, numjobs=numjobs, fio_version=sysctl.get("fio_version"))
        meas: dict[tuple[str, str], Measurement] = {}
        targets = ("geli", "md") if params.ceiling else ("geli",)
        for i in range(params.repeat):
            for target in targets:
                session.progress(f"run {i + 1}/{params.repeat}: {target}")
                md = session.create_md()
                device = md
                if target == "geli":
                    device, info = session.attach_geli(md)
                    crypto = info.crypto
                    if result.crypto is not None and crypto != result.crypto:
                        session.warnings.append(
                            f"GELI crypto path changed between runs: {result.crypto} -> {crypto}"
                        )
                    result.crypto = crypto
                    result.geli_algorithm = info.encryption
                    result.geli_keylength = info.key_length
                for direction in params.directions:
                    d = session.run_fio(device, direction, numjobs)
                    m = meas.setdefault((target, direction), Measurement(target, direction))
                    m.samples.append(Sample(d.bw_bytes, d.iops, d.runtime_ms))
                if target == "geli":
                    session.detach_geli(device)
                session.destroy_md(md)
        result.measurements = [meas[(t, d)] for t in targets for d in params.directions if (t, d) in meas]
        return result

    result, report = _guarded(session, body)
    assert isinstance(result, BenchResult)
    result.cleanup = report
    result.started = started
    result.finished = _now()
    result.warnings = session.warnings
    if params.repeat == 1:
        result.warnings.append("single run: no spread; use --repeat N for a median and spread")
    if not report.ok:
        result.warnings.append(report.summary())
    return result


def _fill_facts(hf: HostFacts, sysctl: dict[str, str]) -> None:
    hf.hostname = hf.hostname or sysctl.get("kern.hostname")
    hf.release = hf.release or sysctl.get("kern.osrelease")
    hf.arch = hf.arch or sysctl.get("hw.machine_arch")
    hf.cpu_model = hf.cpu_model or sysctl.get("hw.model")
    for attr, oid in (("ncpu", "hw.ncpu"), ("physmem", "hw.physmem")):
        if getattr(hf, attr) is None:
            try:
                setattr(hf, attr, int(sysctl.get(oid, "")))
            except ValueError:
                pass


def cleanup_leftovers(host: Host, progress: Callable[[str], None] | None = None) -> CleanupReport:
    """`bench --cleanup`: remove md units (and their .eli) an interrupted bench left behind."""
    session = BenchSession(host, BenchParams(), progress)

    def body() -> None:
        res = session.must(ST_ROOT, "id -u")
        if res.stdout.decode(errors="replace").strip() != "0":
            raise BenchError(ST_ROOT, "removing md(4)/GELI devices needs root")
        out = session.run(ST_SYSCTL, "sysctl kern.boottime").stdout.decode(errors="replace")
        facts = parse_sysctl(out)
        session.boottime = parse_boottime(facts.get("kern.boottime"))
        for md in session.find_leftovers():
            session.devices.md.append(md)
            eli = f"{md}.eli"
            if session.run(ST_LEFTOVERS, f"test -c /dev/{eli}").ok:
                session.devices.eli.append(eli)
        if not session.devices.md:
            session.run(ST_STATE, f"rm -f {STATE_FILE}")

    _, report = _guarded(session, body)
    return report


# --------------------------------------------------------------------------- userland


USERLAND_CIPHERS = ("aes-128-gcm", "aes-256-gcm", "chacha20-poly1305")
IA32CAP_MASK = "~0x200000200000000"  # AES-NI (bit 57) and PCLMULQDQ (bit 33) off


def userland(host: Host, seconds: int = 1, x86: bool = True) -> UserlandResult:
    """`openssl speed -elapsed -evp` for AES-GCM and ChaCha20-Poly1305, plus AES-NI masked."""
    version: str | None = None
    speeds: list[CipherSpeed] = []

    def one(cipher: str, env: str) -> float | None:
        nonlocal version
        base = f"{env}openssl speed -elapsed -seconds {seconds} -evp {cipher}"
        res = host.run(base, timeout=seconds * 6 * 4 + 60)
        if not res.ok:  # OpenSSL before 1.1.0 has no -seconds
            res = host.run(f"{env}openssl speed -elapsed -evp {cipher}", timeout=3 * 6 * 4 + 60)
        parsed = openssl_speed.parse(res.stdout.decode(errors="replace"))
        version = version or parsed.version
        row = parsed.row(cipher)
        return row.bulk_bytes_per_s if row else None

    for cipher in USERLAND_CIPHERS:
        plain = one(cipher, "")
        masked = one(cipher, f"OPENSSL_ia32cap={shlex.quote(IA32CAP_MASK)} ") if x86 else None
        speeds.append(CipherSpeed(cipher, plain, masked))
    prefer, advice = userland_advice(speeds)
    return UserlandResult(version, speeds, prefer, advice)


def userland_advice(speeds: list[CipherSpeed]) -> tuple[str | None, str]:
    by = {s.cipher: s for s in speeds}
    aes = by.get("aes-128-gcm")
    cha = by.get("chacha20-poly1305")
    if aes is None or cha is None or not aes.bytes_per_s or not cha.bytes_per_s:
        return None, "openssl speed gave no usable figures; no cipher advice"
    ratio = aes.bytes_per_s / cha.bytes_per_s
    masked_note = ""
    if aes.masked_bytes_per_s:
        gain = aes.bytes_per_s / aes.masked_bytes_per_s
        if gain < 1.5:
            masked_note = (
                f" Masking AES-NI changes AES-128-GCM only {gain:.1f}x: OpenSSL is not using AES-NI here "
                "(CPU without it, or a VM that hides it)."
            )
        else:
            masked_note = f" AES-NI makes AES-128-GCM {gain:.1f}x faster than without it."
    if ratio >= 1.0:
        return "AES-GCM", (
            f"Prefer AES-GCM for TLS/SSH on this host: AES-128-GCM runs {ratio:.1f}x ChaCha20-Poly1305."
            + masked_note
        )
    return "ChaCha20-Poly1305", (
        f"Prefer ChaCha20-Poly1305 for TLS/SSH on this host: it runs {1 / ratio:.1f}x AES-128-GCM, "
        "as on CPUs/VMs without usable AES-NI." + masked_note
    )
