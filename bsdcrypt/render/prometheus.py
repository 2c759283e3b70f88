"""Prometheus text exposition (node_exporter textfile collector) for one host or a fleet.

`render(statuses)` is used by `status --format prometheus`, `analyze` and fleet reports. The
output follows the text exposition format 0.0.4: every family has one `# HELP` and one `# TYPE`
line and its samples directly after them (families never interleave), label values are escaped
(backslash, double quote, line feed), and samples carry no timestamps (the textfile collector
rejects them). A value bsdcrypt could not determine is left out rather than reported as 0.

Every host's series carry the labels `host` (the name the host reports, or the Ansible inventory
name) and `source` (how it was reached or collected: local, user@host:port, replay:FILE,
ansible:FILE, file:FILE), so two hosts with the same name from different sources stay distinct.
The metric names are documented in docs/monitoring.md; keep them stable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bsdcrypt.platform import FREEBSD_FAMILY  # GELI exists there only
from bsdcrypt.status import EXIT_CODES, Status

PREFIX = "bsdcrypt_"
VERDICTS: tuple[str, ...] = tuple(EXIT_CODES)  # ok, warning, critical, unknown
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical", "unknown")

Labels = tuple[tuple[str, str], ...]
Sample = tuple[Labels, float]


def escape_label_value(value: str) -> str:
    """Label value escaping of the text format: \\ -> \\\\, " -> \\", line feed -> \\n."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text escaping: only backslash and line feed."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _bool(value: bool | None) -> float | None:
    return None if value is None else (1.0 if value else 0.0)


def _host_labels(s: Status) -> Labels:
    return (("host", s.host or ""), ("source", s.source or ""))


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    samples: Callable[[Status], Iterable[tuple[Labels, float | None]]]
    type: str = "gauge"


def _one(get: Callable[[Status], float | None]) -> Callable[[Status], Iterable[tuple[Labels, float | None]]]:
    return lambda s: [((), get(s))]


def _aes_active(s: Status) -> Iterable[tuple[Labels, float | None]]:
    d = s.driver
    if d.attached is None:
        return []
    active = d.attached is True and d.accelerates_aes is True
    return [((("driver", d.name or ""),), 1.0 if active else 0.0)]


def _driver_states(s: Status) -> Iterable[tuple[Labels, float | None]]:
    out: list[tuple[Labels, float | None]] = []
    for d in (s.driver, *s.other_drivers):
        if d.name is None and d.state == "unknown":
            continue
        out.append(((("driver", d.name or ""), ("state", d.state)), 1.0))
    return out


def _geli_count(pred: Callable[[Status], Iterable[bool]]) -> Callable[[Status], Iterable[tuple[Labels, float | None]]]:
    def samples(s: Status) -> Iterable[tuple[Labels, float | None]]:
        if s.os.name not in FREEBSD_FAMILY:
            return []
        return [((), float(sum(1 for x in pred(s) if x)))]

    return samples


def _info(s: Status) -> Iterable[tuple[Labels, float | None]]:
    o = s.os
    labels = (
        ("os", o.name or ""),
        ("variant", o.variant or ""),
        ("product", o.product or ""),
        ("release", o.release or ""),
        ("arch", o.arch or ""),
        ("kernel_ident", o.kernel_ident or ""),
        ("cpu_model", s.cpu.model or ""),
        ("hypervisor", (s.cpu.hypervisor or "") if s.cpu.vm else ""),
    )
    return [(labels, 1.0)]


def _findings(s: Status) -> Iterable[tuple[Labels, float | None]]:
    seen: set[str] = set()
    out: list[tuple[Labels, float | None]] = []
    for f in s.findings:
        if f.id in seen:
            continue
        seen.add(f.id)
        out.append(((("id", f.id), ("severity", f.severity)), 1.0))
    return out


FAMILIES: tuple[Family, ...] = (
    Family("info", "Host facts as labels (OS, variant, release, arch, kernel ident, CPU); value is always 1.", _info),
    Family(
        "aesni_active",
        "1 if the kernel AES accelerator (aesni on x86, armv8crypto on arm64) is attached and accelerates AES.",
        _aes_active,
    ),
    Family("cpu_aes", "1 if the CPU offers AES instructions to the kernel (AESNI feature flag, AES on arm64).",
           _one(lambda s: _bool(s.cpu.aesni))),
    Family("cpu_sha", "1 if the CPU offers SHA extensions.", _one(lambda s: _bool(s.cpu.sha))),
    Family("driver_state",
           "Crypto driver state (builtin, loaded, not-loaded, no-device, missing, unknown); value is always 1.",
           _driver_states),
    Family("persisted", "1 if the accelerator survives a reboot (compiled in, or an effective <driver>_load=YES).",
           _one(lambda s: _bool(s.persist.configured))),
    Family("persist_needed", "1 if a loader.conf line is needed at all (0 where the kernel has the driver built in).",
           _one(lambda s: _bool(s.persist.needed))),
    Family("geli_providers", "GELI providers attached.", _geli_count(lambda s: (True for _ in s.geli))),
    Family("geli_software_providers", "GELI providers doing their crypto in software.",
           _geli_count(lambda s: (g.accelerated is False for g in s.geli))),
    Family("geli_needs_reattach_providers",
           "GELI providers on software crypto although an accelerator is attached now (re-attach them).",
           _geli_count(lambda s: (g.needs_reattach for g in s.geli))),
    Family("userland_aes_case",
           "Userland AES-NI: aesni-visible, hidden-by-hypervisor, cpu-without-aesni or not-x86 (absent: unknown); "
           "value is always 1.",
           lambda s: [((("case", s.userland_aes.case),), 1.0)] if s.userland_aes.case else []),
    Family("userland_ia32cap_overrides", "OPENSSL_ia32cap settings found in configuration files (absent: not looked).",
           lambda s: [((), float(len(s.userland_aes.overrides)))] if s.userland_aes.overrides is not None else []),
    Family("finding", "A finding reported for the host (see docs/findings.md); value is always 1.", _findings),
    Family("verdict", "The host's verdict as a state set: 1 for the current verdict, 0 for the others.",
           lambda s: [((("verdict", v),), 1.0 if s.verdict == v else 0.0) for v in VERDICTS]),
    Family("exit_code", "Monitoring-plugins exit status: 0 ok, 1 warning, 2 critical, 3 unknown.",
           _one(lambda s: float(s.exit_code))),
)


def _sample_line(name: str, labels: Labels, value: float) -> str:
    if labels:
        from bsdcrypt.text import visible

        # host text: no control character reaches the file, no label value is longer than a field
        inner = ",".join(f'{k}="{escape_label_value(visible(v))}"' for k, v in labels)
        return f"{name}{{{inner}}} {format_value(value)}"
    return f"{name} {format_value(value)}"


def render(statuses: Sequence[Status], *, timestamp: float | None = None) -> str:
    """The exposition text for the statuses (one or a fleet). A family without samples is omitted.

    `timestamp` (seconds since the epoch) adds `bsdcrypt_last_run_timestamp_seconds`, so a stale
    textfile can be alerted on.
    """
    lines: list[str] = []
    for fam in FAMILIES:
        name = PREFIX + fam.name
        body: list[str] = []
        seen: set[Labels] = set()
        for s in statuses:
            host = _host_labels(s)
            for extra, value in fam.samples(s):
                if value is None:
                    continue
                labels = host + extra
                if labels in seen:  # the same host twice: one series only, the first wins
                    continue
                seen.add(labels)
                body.append(_sample_line(name, labels, value))
        if body:
            lines += [f"# HELP {name} {escape_help(fam.help)}", f"# TYPE {name} {fam.type}", *body]
    if timestamp is not None:
        name = PREFIX + "last_run_timestamp_seconds"
        lines += [
            f"# HELP {name} When bsdcrypt wrote these metrics, in seconds since the epoch.",
            f"# TYPE {name} gauge",
            f"{name} {format_value(float(timestamp))}",
        ]
    return "\n".join(lines) + "\n" if lines else ""


# --------------------------------------------------------------------------- bench

BENCH_PREFIX = PREFIX + "bench_"


def _family(name: str, help_: str, samples: list[tuple[Labels, float]]) -> list[str]:
    if not samples:
        return []
    return [
        f"# HELP {name} {escape_help(help_)}",
        f"# TYPE {name} gauge",
        *(_sample_line(name, labels, value) for labels, value in samples),
    ]


def render_bench(record: Mapping[str, Any], source: str, *, timestamp: float | None = None) -> str:
    """Exposition text for one `bsdcrypt bench` run, from its JSON record (BenchResult.to_record()).

    Throughput is in bytes per second, the Prometheus base unit (MiB/s = value / 1048576). The
    family names start with `bsdcrypt_bench_`, so this can be its own textfile (e.g.
    bsdcrypt_bench.prom) beside the status one without any family appearing twice.
    """
    host_ = record.get("host") or {}
    host: Labels = (("host", str(host_.get("hostname") or "")), ("source", source))
    geli = record.get("geli") or {}
    crypto = str(record.get("crypto_mode") or "")
    run: Labels = (
        ("crypto", crypto),
        ("algorithm", str(geli.get("algorithm") or "")),
        ("key_length", str(geli.get("key_length") or "")),
    )
    throughput: list[tuple[Labels, float]] = []
    iops: list[tuple[Labels, float]] = []
    for r in record.get("results") or []:
        target = str(r.get("target"))
        labels = host + (("target", target), ("direction", str(r.get("direction"))))
        labels += run if target == "geli" else (("crypto", ""), ("algorithm", ""), ("key_length", ""))
        if isinstance(r.get("median_bytes_per_s"), (int, float)):
            throughput.append((labels, float(r["median_bytes_per_s"])))
        if isinstance(r.get("median_iops"), (int, float)):
            iops.append((labels, float(r["median_iops"])))
    accelerated = record.get("accelerated")
    ratios = [
        (host + (("direction", str(d)),), float(f))
        for d, f in (record.get("ceiling_fraction") or {}).items()
        if isinstance(f, (int, float))
    ]
    lines = [
        *_family(BENCH_PREFIX + "throughput_bytes_per_second",
                 "Median fio throughput of the last bench: GELI on md (target=geli) and the bare md ceiling "
                 "(target=md), in bytes per second.", throughput),
        *_family(BENCH_PREFIX + "iops", "Median fio IOPS of the last bench.", iops),
        *_family(BENCH_PREFIX + "accelerated",
                 "1 if GELI used an accelerated crypto path (Crypto: hardware or accelerated software) in the "
                 "last bench.",
                 [] if not isinstance(accelerated, bool) else [(host, 1.0 if accelerated else 0.0)]),
        *_family(BENCH_PREFIX + "ceiling_ratio",
                 "GELI throughput as a fraction of the bare md ceiling in the last bench.", ratios),
    ]
    if timestamp is not None:
        lines += _family(BENCH_PREFIX + "last_run_timestamp_seconds",
                         "When bsdcrypt wrote these bench metrics, in seconds since the epoch.",
                         [((), float(timestamp))])
    return "\n".join(lines) + "\n" if lines else ""
