"""Bench records (`bench` JSON, ~/.local/share/bsdcrypt/bench): saved after a run, read back for `bench --compare`.

A record is untrusted input (it may be edited, truncated or not a record at all): every field is
checked for its type, and a bad file is one BenchRecordError naming it, never a traceback.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from bsdcrypt.bench.model import BenchParams, BenchResult, HostFacts, Measurement, Sample
from bsdcrypt.errors import BsdcryptError

MAX_RECORD_BYTES = 8 * 1024 * 1024
TEXT_LIMIT = 256  # characters kept of one text field of a record (a host name is at most 255)


class BenchRecordError(BsdcryptError):
    pass


def default_results_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "bsdcrypt" / "bench"


def save_json(record: dict[str, Any], directory: Path, started: str, hostname: str | None, suffix: str = "") -> Path:
    """Write a record as DIR/<UTC time>-<host><suffix>.json (never over an existing file)."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = re.sub(r"[^0-9T]", "", started.split("+")[0]) or "run"
    host = re.sub(r"[^A-Za-z0-9._-]", "_", hostname or "host")
    path = directory / f"{stamp}-{host}{suffix}.json"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{stamp}-{host}{suffix}-{n}.json"
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def save_record(result: BenchResult, directory: Path) -> Path:
    """Write the run's JSON record as DIR/<UTC time>-<host>.json; returns the path."""
    return save_json(result.to_record(), directory, result.started, result.host.hostname)


def _str(value: Any) -> str | None:
    """A text field, printable: a record may carry terminal escapes (edited, or from a hostile host);
    they are spelled out (\\x1b) and the field is cut at TEXT_LIMIT characters."""
    if not isinstance(value, str):
        return None
    if value.isprintable() and len(value) <= TEXT_LIMIT:
        return value
    text = "".join(c if c.isprintable() else (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
                   for c in value[:TEXT_LIMIT])
    return text + ("…" if len(value) > TEXT_LIMIT else "")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} is not a number of bytes or operations per second")
    return float(value)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def result_from_record(rec: Any) -> BenchResult:
    """The BenchResult a `bench` JSON record describes (ValueError if it is not one)."""
    if not isinstance(rec, dict):
        raise ValueError("not a JSON object")
    kind = rec.get("kind")
    if kind == "bsdcrypt-bench-userland":
        raise ValueError("a `bench --userland` record (openssl speed figures, no GELI to chart)")
    if kind != "bsdcrypt-bench":
        raise ValueError("not a bsdcrypt bench record (no \"kind\": \"bsdcrypt-bench\")")
    host = _obj(rec.get("host"))
    facts = HostFacts(
        hostname=_str(host.get("hostname")), release=_str(host.get("release")), arch=_str(host.get("arch")),
        cpu_model=_str(host.get("cpu_model")), ncpu=_int(host.get("ncpu")), physmem=_int(host.get("physmem")),
        driver=_str(host.get("driver")), driver_state=_str(host.get("driver_state")) or "unknown",
    )
    p = _obj(rec.get("parameters"))
    defaults = BenchParams()
    params = BenchParams(
        size_mib=_int(p.get("size_mib")) or defaults.size_mib,
        keylen=_int(p.get("keylen")) or defaults.keylen,
        sectorsize=_int(p.get("sectorsize")) or defaults.sectorsize,
        ealgo=_str(p.get("ealgo")) or defaults.ealgo,
        bs=_str(p.get("bs")) or defaults.bs,
        iodepth=_int(p.get("iodepth")) or defaults.iodepth,
        runtime_s=_int(p.get("runtime_s")) or defaults.runtime_s,
        ioengine=_str(p.get("ioengine")) or defaults.ioengine,
        repeat=_int(p.get("repeat")) or 1,
    )
    results = rec.get("results")
    if not isinstance(results, list) or not results:
        raise ValueError("no results")
    measurements = []
    for i, r in enumerate(results):
        if not isinstance(r, dict) or r.get("target") not in ("geli", "md") or r.get("direction") not in (
            "write", "read"
        ):
            raise ValueError(f"result {i + 1} has no target geli/md and direction write/read")
        samples = r.get("samples")
        if not isinstance(samples, list) or not samples:
            raise ValueError(f"result {i + 1} has no samples")
        parsed = []
        for s in samples:
            if not isinstance(s, dict):
                raise ValueError(f"result {i + 1}: a sample is not an object")
            parsed.append(Sample(_num(s.get("bw_bytes"), "bw_bytes"), _num(s.get("iops"), "iops"),
                                 _int(s.get("runtime_ms")) or 0))
        measurements.append(Measurement(str(r["target"]), str(r["direction"]), parsed))
    geli = _obj(rec.get("geli"))
    warnings = rec.get("warnings")
    return BenchResult(
        host=facts,
        params=params,
        numjobs=_int(p.get("numjobs")) or 1,
        fio_version=_str(rec.get("fio_version")),
        crypto=_str(rec.get("crypto_mode")),
        geli_algorithm=_str(geli.get("algorithm")),
        geli_keylength=_int(geli.get("key_length")),
        measurements=measurements,
        started=_str(rec.get("started")) or "",
        finished=_str(rec.get("finished")) or "",
        warnings=[w for w in warnings if isinstance(w, str)] if isinstance(warnings, list) else [],
        context=_str(rec.get("context")),
    )


def expand(paths: list[str]) -> list[Path]:
    """A folder stands for the GELI bench records in it (*.json but *-userland.json, by name: the names
    start with the UTC time); a folder without one is BenchRecordError saying what it holds."""
    out: list[Path] = []
    for p in paths:
        path = Path(p).expanduser()
        if path.is_dir():
            records = sorted(x for x in path.glob("*.json") if x.is_file())
            found = [x for x in records if not x.name.endswith(USERLAND_SUFFIX)]
            if not found:
                raise BenchRecordError(no_records(p, records))
            out += found
        else:
            out.append(path)
    return out


USERLAND_SUFFIX = "-userland.json"  # how `bench userland` names its records


def no_records(folder: str, records: list[Path]) -> str:
    """Why a folder gives nothing to compare: what it holds, and what compare can chart."""
    if not records:
        return f"{folder}: no bench records (*.json) in this folder"
    names = [x.name for x in records]
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    what = f"{len(names)} bench userland record{'s' if len(names) > 1 else ''}"
    return (
        f"{folder}: no GELI bench records to compare: it holds {what} ({shown}), which have no GELI "
        "figures to chart; compare charts the records of `bsdcrypt bench` (geli) runs"
    )


def load(path: Path) -> BenchResult:
    """One record file; BenchRecordError (one line naming the file) if it cannot be read or is not one."""
    from bsdcrypt.fsutil import InputError, read_input

    try:
        data = read_input(path, MAX_RECORD_BYTES, "bench record")
    except InputError as exc:
        raise BenchRecordError(str(exc)) from exc
    try:
        return result_from_record(json.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BenchRecordError(f"{path}: not JSON ({exc.__class__.__name__}: {exc})".splitlines()[0]) from exc
    except (ValueError, TypeError) as exc:
        raise BenchRecordError(f"{path}: {exc}") from exc
    except RecursionError as exc:  # `[[[[...`: nested deeper than Python's parser goes
        raise BenchRecordError(f"{path}: JSON nested too deep to be a bench record") from exc


def label(result: BenchResult, path: Path | None = None) -> str:
    """How a run is named in a comparison: host, start time and context ("before", "after")."""
    when = result.started.replace("T", " ")[:16] if result.started else (path.name if path else "?")
    text = f"{result.host.hostname or '?'} {when}"
    if result.context:
        text += f" ({result.context.split(': ')[-1]})"
    return text


def same_file(a: str, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
