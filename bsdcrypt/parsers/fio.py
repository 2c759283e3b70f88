"""fio `--output-format=json` -> bandwidth, IOPS and runtime per direction.

Pure: text in, plain data out. Handles the JSON of several fio generations:

* fio 2.x: latency objects `slat`/`clat`/`lat` in microseconds, `io_bytes` is in
  **KiB** (stat.c emitted `io_bytes >> 10` under that name), no `bw_bytes`.
* fio 3.0/3.1: `*_ns` latency objects in nanoseconds, `io_bytes` in bytes plus
  `io_kbytes`, still no `bw_bytes` (Ubuntu 18.04 ships 3.1).
* fio 3.2+: `bw_bytes` (bytes/s) as well as `bw` (KiB/s).

Also: a non-JSON preamble (`note: both iodepth >= 1 and synchronous I/O engine ...`,
`fio: ...` warnings) before the object and text after it; no `disk_util` key (FreeBSD's
fio has no disk statistics); `group_reporting` (one aggregated `jobs[]` entry per group)
as well as one entry per job clone, which `direction()` sums.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from bsdcrypt.errors import BsdcryptError

DIRECTIONS = ("read", "write", "trim")
_VERSION = re.compile(r"fio-(\d+)\.(\d+)")


class FioParseError(BsdcryptError):
    """The text holds no fio JSON object, or one without jobs."""


@dataclass(frozen=True)
class FioDirection:
    """One direction (read/write/trim) of one fio job or of a sum of jobs."""

    bw_bytes: float  # bytes per second
    iops: float
    runtime_ms: int  # the longest runtime of the jobs summed
    io_bytes: int  # bytes moved
    total_ios: int | None = None
    clat_mean_ns: float | None = None  # completion latency mean, normalised to ns
    lat_mean_ns: float | None = None

    @property
    def mib_per_s(self) -> float:
        return self.bw_bytes / (1024 * 1024)


@dataclass(frozen=True)
class FioJob:
    name: str
    groupid: int
    error: int
    directions: dict[str, FioDirection] = field(default_factory=dict)  # only directions with I/O
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FioResult:
    version: str | None  # e.g. "fio-3.33"
    jobs: tuple[FioJob, ...]
    global_options: dict[str, str] = field(default_factory=dict)
    has_disk_util: bool = False
    preamble: tuple[str, ...] = ()  # non-JSON lines before the object, e.g. "note: ..."
    trailer: tuple[str, ...] = ()  # non-JSON lines after the object

    @property
    def version_tuple(self) -> tuple[int, int] | None:
        return _version_tuple(self.version)

    @property
    def groups(self) -> tuple[int, ...]:
        return tuple(sorted({j.groupid for j in self.jobs}))

    @property
    def errors(self) -> tuple[tuple[str, int], ...]:
        return tuple((j.name, j.error) for j in self.jobs if j.error)

    def direction(self, ddir: str, groupid: int | None = None) -> FioDirection | None:
        """`ddir` summed over the jobs of one group (the only group when `groupid` is None).

        Jobs of one group ran at the same time, so bandwidth and IOPS add up. Different
        groups (stonewall/new_group) ran one after another and are never summed.
        """
        if ddir not in DIRECTIONS:
            raise ValueError(f"unknown fio direction {ddir!r}")
        if groupid is None:
            groups = self.groups
            if len(groups) > 1:
                raise FioParseError(f"fio output has {len(groups)} job groups; say which one")
            groupid = groups[0] if groups else 0
        parts = [j.directions[ddir] for j in self.jobs if j.groupid == groupid and ddir in j.directions]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        n = sum(p.total_ios or 0 for p in parts)
        return FioDirection(
            bw_bytes=sum(p.bw_bytes for p in parts),
            iops=sum(p.iops for p in parts),
            runtime_ms=max(p.runtime_ms for p in parts),
            io_bytes=sum(p.io_bytes for p in parts),
            total_ios=n if all(p.total_ios is not None for p in parts) else None,
            clat_mean_ns=_weighted(parts, "clat_mean_ns"),
            lat_mean_ns=_weighted(parts, "lat_mean_ns"),
        )


def _weighted(parts: list[FioDirection], attr: str) -> float | None:
    vals = [(getattr(p, attr), p.total_ios or 0) for p in parts]
    if any(v is None for v, _ in vals):
        return None
    total = sum(w for _, w in vals)
    if total == 0:
        return None
    return sum(float(v) * w for v, w in vals) / total


def _version_tuple(version: str | None) -> tuple[int, int] | None:
    if not version:
        return None
    m = _VERSION.search(version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _num(obj: dict[str, Any], key: str) -> float | None:
    v = obj.get(key)
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _lat_mean_ns(d: dict[str, Any], name: str) -> float | None:
    """`<name>_ns.mean` (fio 3) or `<name>.mean` in usec (fio 2), as ns."""
    ns = d.get(f"{name}_ns")
    if isinstance(ns, dict):
        return _num(ns, "mean")
    us = d.get(name)
    if isinstance(us, dict):
        mean = _num(us, "mean")
        return None if mean is None else mean * 1000.0
    return None


def _direction(d: dict[str, Any], io_bytes_is_kib: bool) -> FioDirection | None:
    runtime = _num(d, "runtime") or 0.0
    raw_io = _num(d, "io_bytes")
    if raw_io is None:
        kb = _num(d, "io_kbytes")
        io_bytes = 0.0 if kb is None else kb * 1024
    else:
        io_bytes = raw_io * 1024 if io_bytes_is_kib else raw_io
    total_ios = _num(d, "total_ios")
    if io_bytes <= 0 and (total_ios or 0) <= 0:
        return None  # this job did no I/O in this direction
    bw_bytes = _num(d, "bw_bytes")
    if bw_bytes is None:
        # fio computes bw_bytes = 1000 * io_bytes / runtime; `bw` is the same in KiB/s,
        # truncated to an integer, so prefer the exact quotient when runtime is known.
        if runtime > 0:
            bw_bytes = 1000.0 * io_bytes / runtime
        else:
            bw_bytes = (_num(d, "bw") or 0.0) * 1024
    return FioDirection(
        bw_bytes=bw_bytes,
        iops=_num(d, "iops") or 0.0,
        runtime_ms=int(runtime),
        io_bytes=int(io_bytes),
        total_ios=None if total_ios is None else int(total_ios),
        clat_mean_ns=_lat_mean_ns(d, "clat"),
        lat_mean_ns=_lat_mean_ns(d, "lat"),
    )


def _str_dict(v: Any) -> dict[str, str]:
    if not isinstance(v, dict):
        return {}
    return {str(k): str(val) for k, val in v.items()}


def _split(text: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """Find the fio JSON object: the first line that starts with `{` and decodes."""
    decoder = json.JSONDecoder()
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("{"):
            start = offset + (len(line) - len(line.lstrip()))
            try:
                obj, end = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                offset += len(line)
                continue
            if isinstance(obj, dict) and ("jobs" in obj or "fio version" in obj):
                before = [s for s in text[:start].splitlines() if s.strip()]
                after = [s for s in text[end:].splitlines() if s.strip()]
                return obj, before, after
        offset += len(line)
    raise FioParseError("no fio JSON object found in the output (was --output-format=json given?)")


def parse(text: str) -> FioResult:
    """Parse fio's JSON output (with any preamble/trailer lines around it)."""
    obj, before, after = _split(text)
    version = obj.get("fio version")
    version = str(version) if version is not None else None
    vt = _version_tuple(version)
    jobs_raw = obj.get("jobs")
    if not isinstance(jobs_raw, list):
        raise FioParseError("fio JSON has no 'jobs' list")
    jobs: list[FioJob] = []
    for raw in jobs_raw:
        if not isinstance(raw, dict):
            continue
        if vt is not None:
            kib = vt[0] < 3
        else:
            # No version string: fio 3.x added io_kbytes when io_bytes became bytes.
            kib = not any(isinstance(raw.get(d), dict) and "io_kbytes" in raw[d] for d in DIRECTIONS)
        dirs: dict[str, FioDirection] = {}
        for ddir in DIRECTIONS:
            d = raw.get(ddir)
            if isinstance(d, dict):
                parsed = _direction(d, kib)
                if parsed is not None:
                    dirs[ddir] = parsed
        err = _num(raw, "error")
        gid = _num(raw, "groupid")
        jobs.append(
            FioJob(
                name=str(raw.get("jobname", "")),
                groupid=int(gid) if gid is not None else 0,
                error=int(err) if err is not None else 0,
                directions=dirs,
                options=_str_dict(raw.get("job options")),
            )
        )
    return FioResult(
        version=version,
        jobs=tuple(jobs),
        global_options=_str_dict(obj.get("global options")),
        has_disk_util="disk_util" in obj,
        preamble=tuple(before),
        trailer=tuple(after),
    )
