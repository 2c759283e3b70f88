"""fleet-audit's and analyze's reports: the hosts table, CSV, the JSON/YAML document, Prometheus.

Hosts needing action come first (critical, warning, unknown, ok), then in host order.
"""

from __future__ import annotations

import csv
import io
import ipaddress
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from bsdcrypt.fleet.results import VERDICT_ORDER, FleetRun, HostResult
from bsdcrypt.hostsfile import HostEntry
from bsdcrypt.render.consumers import software as consumers_software
from bsdcrypt.render.serialize import dump, yesno
from bsdcrypt.status import SEVERITY_RANK, Finding, Status


def _natural(text: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key where digit runs compare as numbers: fw2 before fw10."""
    # ASCII digit runs only, of a length int() takes: a host or file name holding '1²2' or 5,000 digits
    # is sorted as text (int('²') and int() of over 4300 digits raise ValueError)
    return tuple((0, int(part), "") if part[0] in "0123456789" and len(part) <= 300 else (1, 0, part.lower())
                 for part in re.split(r"([0-9]+)", text) if part)


def host_order(entry: HostEntry) -> tuple[Any, ...]:
    """IP addresses by value (IPv4, then IPv6), then names naturally (fw2 before fw10), then anything
    else (replay:, analyze's inputs) naturally; port and user break ties."""
    if entry.host:
        tail = (entry.port or 0, entry.user or "")
        try:
            ip = ipaddress.ip_address(entry.host.split("%", 1)[0])
        except ValueError:
            return (1, _natural(entry.host), *tail)
        return (0, ip.version, int(ip), *tail)
    return (2, _natural(entry.spec))


def sort_results(results: Sequence[HostResult]) -> list[HostResult]:
    """Hosts needing action first (critical, warning, unknown, ok), then in host order."""
    return sorted(results, key=lambda r: (VERDICT_ORDER.get(r.verdict, 9), host_order(r.entry)))


def _top_finding(status: Status) -> Finding | None:
    """The most severe finding (the first, as assess() orders them; the rank again for a Status built elsewhere)."""
    return max(status.findings, key=lambda f: SEVERITY_RANK.get(f.severity, -1), default=None)


def row(r: HostResult) -> dict[str, str]:
    """The cells of one host's table row, host text made visible and cut (bsdcrypt.text)."""
    from bsdcrypt.text import FIELD_LIMIT, MESSAGE_LIMIT, visible

    return {k: visible(v, MESSAGE_LIMIT if k == "finding" else FIELD_LIMIT) for k, v in _row(r).items()}


def _row(r: HostResult) -> dict[str, str]:
    from bsdcrypt.text import visible_status

    s = visible_status(r.status)
    o, c, d, p = s.os, s.cpu, s.driver, s.persist
    top = _top_finding(s)
    if r.error is not None:
        return {
            "host": r.target, "os": "-", "aesni": "-", "driver": "-", "persisted": "-", "geli_software": "-",
            "consumers_software": "-", "verdict": r.verdict, "finding": f"{r.error_kind}: {r.error}",
        }
    osname = " ".join(x for x in (o.name, o.release) if x) or "unknown"
    if o.product:
        osname += f" ({o.product})"
    elif o.variant and o.variant not in ("freebsd", "unknown") and o.variant != (o.name or "").lower():
        osname += f" ({o.variant})"
    soft = [g.name for g in s.geli if g.accelerated is False]
    persisted = "compiled in" if d.compiled_in else yesno(p.configured)
    if (p.source or "").endswith("(inferred)"):
        persisted = "inferred (appliance)"  # the appliance-managed finding says why
    elif p.inferred:
        persisted += " (inferred)"
    if p.needed is False and not d.compiled_in:
        persisted += " (not needed)"
    return {
        "host": r.target,
        "os": osname,
        "aesni": yesno(c.aesni),
        "driver": f"{d.name or '-'}: {d.state}",
        "persisted": persisted,
        "geli_software": ", ".join(soft) if soft else ("no" if s.geli else "-"),
        "consumers_software": consumers_software(s),
        "verdict": r.verdict,
        "finding": f"{top.id}: {top.message}" if top else "",
    }


HEADERS = {
    "host": "host", "os": "OS / release", "aesni": "CPU AES-NI", "driver": "driver", "persisted": "persisted",
    "geli_software": "GELI on software", "consumers_software": "AES in software", "verdict": "verdict",
    "finding": "top finding",
}


def clip(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(run: FleetRun, clip: Callable[[str], str], failed: str, timing: str, width: int | None = None,
           whole_findings: bool = False) -> str:
    """The hosts table, the totals per verdict and a one-line summary; with a width, fitted to it."""
    from tabulate import tabulate

    cells = []
    for r in sort_results(run.results):
        c = row(r)
        c["verdict"] = c["verdict"].upper()
        c["finding"] = clip(c["finding"])
        cells.append(c)
    out = tabulate([[c[k] for k in HEADERS] for c in cells], headers=list(HEADERS.values()), tablefmt="simple")
    totals = run.totals()
    parts = [f"{n} {v}" for v, n in totals.items() if n]
    summary = f"{len(run.results)} host{'' if len(run.results) == 1 else 's'}: " + ", ".join(parts)
    if run.failed:
        summary += f" ({run.failed} {failed})"
    summary += timing
    tot = tabulate([[v.upper(), totals[v]] for v in totals], headers=["verdict", "hosts"], tablefmt="simple")
    if width is not None and max(len(line) for line in out.split("\n")) > width:
        from bsdcrypt.render.fit import usable, wrap

        w = usable(width) or width
        out, note = _fitted(cells, w, whole_findings)
        summary = "\n".join(wrap(summary, w) + (wrap(note, w) if note else []))
    from bsdcrypt.text import visible_lines

    return visible_lines(f"{out}\n\n{tot}\n\n{summary}\n")


# On a narrow terminal: how far each column may narrow (0: not at all), and which go first when that is not enough.
_LEAST = {"host": 16, "os": 12, "driver": 12, "persisted": 11, "geli_software": 9, "consumers_software": 9}
_DROP = ("os", "aesni", "geli_software", "consumers_software", "persisted")


def _fitted(cells: list[dict[str, str]], width: int, whole_findings: bool) -> tuple[str, str]:
    """The hosts table in `width` columns and a note saying what it leaves out. fleet-audit's top finding
    narrows to its id (one line per host); analyze's wraps whole in its column."""
    from bsdcrypt.render.fit import Column, fit_columns, simple_table

    notes = []
    if not whole_findings:
        cells = [{**c, "finding": c["finding"].split(": ", 1)[0]} for c in cells]
        notes.append("top findings by id (docs/findings.md)")
    least = {**_LEAST, "finding": 30 if whole_findings else 0}
    columns = [Column(k, h, least.get(k, 0)) for k, h in HEADERS.items()]
    shown, fitted, dropped = fit_columns(columns, cells, width, _DROP)
    if dropped:
        notes.insert(0, f"not shown at {width} columns: {', '.join(c.header for c in dropped)}")
    note = f"({'; '.join(notes)}: -f csv, -o FILE or a wider terminal shows everything)" if notes else ""
    return simple_table([c.header for c in shown], fitted), note


def render_table(run: FleetRun, width: int | None = None) -> str:
    """fleet-audit's table: findings clipped to a line, the run's timing in the summary."""
    timing = f"; {run.elapsed:.1f}s, parallel {run.parallel}, timeout {run.timeout:g}s"
    return _table(run, clip, "could not be audited", timing, width)


def render_collected(run: FleetRun, width: int | None = None) -> str:
    """analyze's table: the same, findings whole, a summary that fits collected output."""
    return _table(run, lambda text: " ".join(text.split()), "without usable probe output", "", width, True)


def document(run: FleetRun) -> dict[str, Any]:
    return {
        "schema": 1,
        "fleet": {
            "hosts": len(run.results),
            "verdict": run.verdict,
            "totals": run.totals(),
            "failed": run.failed,
            "elapsed_s": round(run.elapsed, 3),
            "parallel": run.parallel,
            "timeout_s": run.timeout,
            "duplicates": run.duplicates,
        },
        "hosts": [r.to_dict() for r in sort_results(run.results)],
    }


CSV_FIELDS = (
    "host", "target", "os", "variant", "release", "arch", "cpu_aesni", "driver", "driver_state",
    "persisted", "persist_needed", "geli_software", "verdict", "top_finding_id", "top_finding",
    "error_kind", "error", "elapsed_s", "userland_aes",  # later columns go last: scripts may count
    "consumers_software",  # issue 27: the kernel consumers running AES in software now
)


def render_csv(run: FleetRun) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    from bsdcrypt.text import MESSAGE_LIMIT, visible, visible_status

    for r in sort_results(run.results):
        s = visible_status(r.status)  # host text: no control character in a cell, each cell bounded
        top = _top_finding(s)
        ok = r.error is None
        w.writerow({k: visible(v, MESSAGE_LIMIT) for k, v in {
            "host": s.host,
            "target": r.target,
            "os": s.os.name or "",
            "variant": s.os.variant if ok else "",
            "release": s.os.release or "",
            "arch": s.os.arch or "",
            "cpu_aesni": "" if s.cpu.aesni is None else str(s.cpu.aesni).lower(),
            "driver": s.driver.name or "",
            "driver_state": s.driver.state if ok else "",
            "persisted": "" if s.persist.configured is None else str(s.persist.configured).lower(),
            "persist_needed": "" if s.persist.needed is None else str(s.persist.needed).lower(),
            "geli_software": " ".join(g.name for g in s.geli if g.accelerated is False),
            "verdict": r.verdict,
            "top_finding_id": top.id if top else "",
            "top_finding": top.message if top else "",
            "error_kind": r.error_kind or "",
            "error": r.error or "",
            "elapsed_s": f"{r.elapsed:.3f}",
            "userland_aes": s.userland_aes.case or "",
            "consumers_software": consumers_software(s) if ok else "",
        }.items()})
    return buf.getvalue()


def render(run: FleetRun, fmt: str, width: int | None = None) -> str:
    """The report in `fmt`; `width` fits the table to a terminal (None: whole lines; other formats never)."""
    if fmt in ("json", "yaml"):
        return dump(document(run), fmt)
    if fmt == "csv":
        return render_csv(run)
    if fmt == "prometheus":
        from bsdcrypt.render import prometheus

        return prometheus.render([r.status for r in sort_results(run.results)], timestamp=time.time())
    return render_table(run, width)
