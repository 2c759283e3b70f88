"""bench's reports: the results table with a bar chart per direction, userland OpenSSL, the cleanup,
and enable --bench's before/after."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bsdcrypt.bench.model import MIB, BenchResult, Speedup, UserlandResult

if TYPE_CHECKING:  # pragma: no cover
    from bsdcrypt.enable.bench import EnableBench

BAR_WIDTH = 40


def spread_text(m: Any) -> str:
    """The spread as the record defines it, (max-min)/median, or "single run"."""
    return "single run" if m.single else f"{m.spread_pct or 0:.1f}% ({len(m.samples)} runs)"


def bar_chart(rows: list[tuple[str, float]]) -> str:
    """Terminal bar chart of MiB/s, one line per (label, MiB/s)."""
    if not rows:
        return ""
    top = max(v for _, v in rows)
    width = max(len(label) for label, _ in rows)
    from bsdcrypt.render.bars import bar

    return "".join(f"  {label:<{width}}  {bar(v, top, BAR_WIDTH, '·')}  {v:8.0f} MiB/s\n" for label, v in rows)


def render_table(result: BenchResult, speedup: Speedup | None = None) -> str:
    from tabulate import tabulate

    from bsdcrypt.text import visible, visible_lines, visible_status

    h = visible_status(result.host)  # host text: control characters shown, each field cut
    p = result.params
    accel = {None: "", True: "  (accelerated)", False: "  (NOT accelerated)"}[result.accelerated]
    lines = [
        f"host: {h.hostname or '?'}  {h.release or ''} {h.arch or ''}".rstrip(),
        f"cpu: {h.cpu_model or 'unknown'}  ({h.ncpu or '?'} CPUs)  "
        f"driver: {h.driver or '-'} {h.driver_state}",
        f"GELI: {result.geli_algorithm or p.ealgo} {result.geli_keylength or p.keylen}, "
        f"sector {p.sectorsize}, Crypto: {result.crypto or 'unknown'}{accel}",
        f"fio: {visible(result.fio_version or '?')}  bs={p.bs} iodepth={p.iodepth} numjobs={result.numjobs} "
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
        lines.append(f"note: {visible(w, None)}")
    return visible_lines("\n".join(lines) + "\n")


def render_userland(u: UserlandResult) -> str:
    from tabulate import tabulate

    rows = []
    for c in u.ciphers:
        plain = "-" if c.bytes_per_s is None else f"{c.bytes_per_s / MIB:.0f}"
        masked = "-" if c.masked_bytes_per_s is None else f"{c.masked_bytes_per_s / MIB:.0f}"
        rows.append([c.cipher, plain, masked])
    from bsdcrypt.text import visible, visible_lines

    head = f"userland (openssl {visible(u.openssl_version or '?')} speed -evp, 16 KiB blocks, MiB/s):"
    body = tabulate(rows, headers=["cipher", "MiB/s", "AES-NI masked"], tablefmt="simple")
    return visible_lines(f"{head}\n{body}\n{u.advice}\n")


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


# --------------------------------------------------------------------------- bench --compare


def ratios(runs: list[tuple[str, BenchResult]]) -> list[str]:
    """Each later run's GELI median over the first run's, per direction ("2 vs 1 write: 5.3x")."""
    out: list[str] = []
    if len(runs) < 2:
        return out
    first = runs[0][1]
    for n, (_, res) in enumerate(runs[1:], start=2):
        for d in ("write", "read"):
            a, b = res.get("geli", d), first.get("geli", d)
            if a is not None and b is not None and b.median_bw > 0:
                out.append(f"run {n} vs run 1, {d}: {a.median_bw / b.median_bw:.1f}x")
    return out


def _figure(m: Any) -> str:
    text = f"{m.median_mib_s:6.0f} MiB/s"
    if not m.single:
        mibs = [x.bw_bytes / MIB for x in m.samples]
        text += f"  [{min(mibs):.0f}..{max(mibs):.0f}, {len(m.samples)} runs, spread {m.spread_pct or 0:.1f}%]"
    return text


def render_compare(runs: list[tuple[str, BenchResult]], width: int = 32) -> str:
    """The terminal comparison: the runs, then per direction a bar per run (GELI, then the md ceiling)."""
    from bsdcrypt.render.bars import chart
    from bsdcrypt.text import MESSAGE_LIMIT, visible

    lines = [f"comparing {len(runs)} bench record{'s' if len(runs) != 1 else ''}:"]
    for n, (path, res) in enumerate(runs, start=1):
        h = res.host
        lines.append(f"  {n}  {visible(path, MESSAGE_LIMIT)}")
        lines.append(
            f"     {h.hostname or '?'}  {h.release or ''} {h.arch or ''}  started {res.started or '?'}"
            f"  GELI {res.geli_algorithm or res.params.ealgo} {res.geli_keylength or res.params.keylen}"
            f"  crypto: {res.crypto or 'unknown'}" + (f"  ({res.context})" if res.context else "")
        )
    groups = []
    for d in ("write", "read"):
        rows: list[tuple[str, float, str]] = []
        for n, (_, res) in enumerate(runs, start=1):
            g, c = res.get("geli", d), res.get("md", d)
            if g is not None:
                rows.append((f"{n} GELI ({res.crypto or 'crypto unknown'})", g.median_mib_s, _figure(g)))
            if c is not None:
                rows.append((f"{n} md ceiling", c.median_mib_s, _figure(c)))
        if rows:
            groups.append((f"{d} (MiB/s, median of the runs; [min..max] with --repeat)", rows))
    lines.append("")
    body = chart(groups, width=width)
    said = ratios(runs)
    tail = "".join(f"  {r}\n" for r in said)
    return "\n".join(lines) + "\n" + body + ("\n" + tail if tail else "")


def compare_document(runs: list[tuple[str, BenchResult]]) -> dict[str, Any]:
    return {
        "kind": "bsdcrypt-bench-compare",
        "records": [{"file": path, **res.to_record()} for path, res in runs],
        "ratios_vs_first": ratios(runs),
    }


def enable_bench_table(eb: EnableBench) -> str:
    """`enable --bench` as text: the before/after table (or the one measurement there is), then
    where the records were saved; "" when nothing was measured."""
    saved = "".join(f"saved: {p}\n" for p in eb.saved)
    if eb.after is not None:
        return render_table(eb.after, eb.speedup) + saved
    if eb.before is not None:
        return render_table(eb.before) + "  no 'after' measurement (it failed; see above)\n" + saved
    return ""


def enable_bench_page(eb: EnableBench) -> str | None:
    """--bench-html FILE: one page of the runs there are (before, after or as it is), the speedup and
    its note; None when nothing was measured."""
    from bsdcrypt.render.html import BenchRun, bench_page, speedup_texts

    runs = [BenchRun(k := (r.context or "run").split(": ")[-1], r, key=k)
            for r in (eb.before, eb.after) if r is not None]
    if not runs:
        return None
    host = runs[0].result.host.hostname or "?"
    note = eb.speedup.note if eb.speedup is not None else ""
    return bench_page(runs, title=f"bsdcrypt enable --bench on {host}", command="enable --bench",
                      source=host + "".join(f"; saved {p}" for p in eb.saved),
                      ratios=[f"speedup, {t}" for t in speedup_texts(eb.speedup)], note=note)
