"""bench's reports: the results table with a bar chart per direction, userland OpenSSL, the cleanup."""

from __future__ import annotations

from typing import Any

from bsdcrypt.bench.model import MIB, BenchResult, Speedup, UserlandResult

BAR_WIDTH = 40


def spread_text(m: Any) -> str:
    """The spread as the record defines it, (max-min)/median, or "single run"."""
    return "single run" if m.single else f"{m.spread_pct or 0:.1f}% ({len(m.samples)} runs)"


def _bar(value: float, top: float) -> str:
    if top <= 0:
        return ""
    n = round(BAR_WIDTH * value / top)
    return "█" * n + "·" * (BAR_WIDTH - n)


def bar_chart(rows: list[tuple[str, float]]) -> str:
    """Terminal bar chart of MiB/s, one line per (label, MiB/s)."""
    if not rows:
        return ""
    top = max(v for _, v in rows)
    width = max(len(label) for label, _ in rows)
    return "".join(f"  {label:<{width}}  {_bar(v, top)}  {v:8.0f} MiB/s\n" for label, v in rows)


def render_table(result: BenchResult, speedup: Speedup | None = None) -> str:
    from tabulate import tabulate

    h = result.host
    p = result.params
    accel = {None: "", True: "  (accelerated)", False: "  (NOT accelerated)"}[result.accelerated]
    lines = [
        f"host: {h.hostname or '?'}  {h.release or ''} {h.arch or ''}".rstrip(),
        f"cpu: {h.cpu_model or 'unknown'}  ({h.ncpu or '?'} CPUs)  "
        f"driver: {h.driver or '-'} {h.driver_state}",
        f"GELI: {result.geli_algorithm or p.ealgo} {result.geli_keylength or p.keylen}, "
        f"sector {p.sectorsize}, Crypto: {result.crypto or 'unknown'}{accel}",
        f"fio: {result.fio_version or '?'}  bs={p.bs} iodepth={p.iodepth} numjobs={result.numjobs} "
        f"runtime={p.runtime_s}s engine={p.ioengine} md={p.size_mib} MiB  runs={p.repeat}",
        "",
    ]
    table = []
    for m in result.measurements:
        spread = spread_text(m)
        what = f"GELI on md ({result.crypto or '?'})" if m.target == "geli" else "bare md (ceiling)"
        table.append([m.direction, what, f"{m.median_mib_s:.0f}", f"{m.median_iops:.0f}", spread])
    lines.append(
        tabulate(table, headers=["dir", "target", "MiB/s", "IOPS", "spread (max-min)/median"], tablefmt="simple")
    )
    lines.append("")
    for d in p.directions:
        rows: list[tuple[str, float]] = []
        if speedup is not None and speedup.before_mib_s.get(d) is not None:
            rows.append((f"{d} before ({speedup.before_crypto})", float(speedup.before_mib_s[d] or 0)))
        g = result.get("geli", d)
        if g is not None:
            rows.append((f"{d} {'after' if speedup else 'GELI'} ({result.crypto})", g.median_mib_s))
        c = result.get("md", d)
        if c is not None:
            rows.append((f"{d} md ceiling", c.median_mib_s))
        lines.append(bar_chart(rows).rstrip("\n"))
        frac = result.ceiling_fraction(d)
        if frac is not None:
            lines.append(f"  {d}: GELI reaches {100 * frac:.0f}% of the md ceiling")
        if speedup is not None and speedup.ratio.get(d) is not None:
            lines.append(f"  {d}: speedup {speedup.ratio[d]:.1f}x")
    if speedup is not None:
        lines.append(f"  {speedup.note}")
    for w in result.warnings:
        lines.append(f"note: {w}")
    return "\n".join(lines) + "\n"


def render_userland(u: UserlandResult) -> str:
    from tabulate import tabulate

    rows = []
    for c in u.ciphers:
        plain = "-" if c.bytes_per_s is None else f"{c.bytes_per_s / MIB:.0f}"
        masked = "-" if c.masked_bytes_per_s is None else f"{c.masked_bytes_per_s / MIB:.0f}"
        rows.append([c.cipher, plain, masked])
    head = f"userland (openssl {u.openssl_version or '?'} speed -evp, 16 KiB blocks, MiB/s):"
    body = tabulate(rows, headers=["cipher", "MiB/s", "AES-NI masked"], tablefmt="simple")
    return f"{head}\n{body}\n{u.advice}\n"


def cleanup_document(report: Any) -> dict[str, Any]:
    """`bench --cleanup -f json|yaml`: what was removed, what could not be, what was left alone and why."""
    return {
        "kind": "bsdcrypt-bench-cleanup",
        "ok": report.ok,
        "removed": list(report.removed),
        "failed": [{"device": dev, "why": why} for dev, why in report.failed],
        "left_alone": [{"device": dev, "why": why} for dev, why in report.refused],
        "summary": report.summary(),
    }
