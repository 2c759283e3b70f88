"""`--format html`: one self-contained page (no network, strict CSP, complete without JavaScript).

The page is built in two steps: pure functions turn a fleet run, a Status or bench results into a
view (plain dicts and strings), and a Jinja2 template with autoescaping prints it. Nothing here
builds HTML from host text by hand: the template escapes every value, the SVG module escapes its
labels. The page's one style sheet and one script are inlined and allowed by their SHA-256 hashes
in the Content-Security-Policy; nothing else may load or run (no 'unsafe-inline', no network).

Imported only when an HTML report is asked for: Jinja2 costs ~40 ms to import, which `status
--format table` must not pay.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import re
import socket
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bsdcrypt import __version__
from bsdcrypt.assess.findings import VARIANT_NAMES
from bsdcrypt.render import svg
from bsdcrypt.render.serialize import yesno
from bsdcrypt.status import SEVERITY_RANK
from bsdcrypt.text import visible as text_visible

if TYPE_CHECKING:
    from jinja2 import Environment

    from bsdcrypt.bench.model import BenchResult, HostFacts, Speedup, UserlandResult
    from bsdcrypt.fleet.results import FleetRun, HostResult
    from bsdcrypt.status import Status

HERE = Path(__file__).parent / "templates"
VERDICTS = ("critical", "warning", "unknown", "ok")
FACT_WIDTH = 12  # the details' key column, in characters (CSS: .kv b {width: 12ch}); continuations indent as far
DRIVER_STATES = ("builtin", "loaded", "not-loaded", "no-device", "missing", "unknown")
FIELD_LIMIT = 1024  # characters of one host-supplied value the page shows; the rest is named, not shown
ROWS_PER_BODY = 100  # the host table's rows per <tbody>: the browser lays out only the bodies in view


def visible(value: object, limit: int = FIELD_LIMIT) -> str:
    """Host text as plain visible characters, line by line, by the text renderers' one rule
    (render/text.visible: non-printable characters spelled out, a line longer than `limit` cut with
    a marker); Jinja2 then escapes the markup."""
    text = "" if value is None else str(value)
    return "\n".join(text_visible(line, limit) for line in text.split("\n"))


# ---------------------------------------------------------------------------- template machinery


@cache
def _env() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=FileSystemLoader(str(HERE)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["v"] = visible
    return env


@cache
def _asset(name: str) -> tuple[str, str]:
    """(text, CSP source) of an inlined asset: its SHA-256 hash, as the policy names it."""
    text = (HERE / name).read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return text, f"'sha256-{digest}'"


def content_security_policy() -> str:
    """Nothing may load (no images, fonts, frames, connections); only the page's own style sheet and
    script run, named by hash; no base URL or form target can be injected."""
    _, css = _asset("report.css")
    _, js = _asset("report.js")
    return (
        f"default-src 'none'; style-src {css}; script-src {js}; img-src 'none'; font-src 'none'; "
        "connect-src 'none'; base-uri 'none'; form-action 'none'; "
        "require-trusted-types-for 'script'; trusted-types 'none'"
    )


def _page(template: str, **view: Any) -> str:
    css, _ = _asset("report.css")
    js, _ = _asset("report.js")
    return _env().get_template(template).render(
        csp=content_security_policy(), css=css, js=js, version=__version__, **view
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _origin() -> str:
    """Where the report was made: user@machine."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "?"
    return f"{user}@{socket.gethostname()}"


# ---------------------------------------------------------------------------- host views


def release_label(s: Status) -> str:
    """The chart's release/variant bucket: the product and its version for appliances, else the OS
    family and its release without the patch level (12.2-RELEASE-p4 -> FreeBSD 12.2-RELEASE); a Linux
    host by its distribution's name."""
    o = s.os
    if o.product:  # pfSense's releases are x.y.z; OPNsense and TrueNAS series are x.y
        digits = r"\d+(?:\.\d+){0,2}" if o.variant == "pfsense" else r"\d+(?:\.\d+)?"
        m = re.match(rf"(\S+)\s+({digits})", o.product)
        return f"{m.group(1)} {m.group(2)}" if m else o.product
    family = VARIANT_NAMES.get(o.variant, o.name or "unknown OS")
    if o.name == "Linux" or not o.release:
        return family
    return f"{family} {re.sub(r'-p[0-9]+$', '', o.release)}"


def _driver_lines(s: Status) -> list[str]:
    out = []
    for d in [s.driver, *s.other_drivers]:
        line = f"{d.name or '-'}: {d.state}"
        if d.algorithms:
            line += f"  <{','.join(d.algorithms)}>"
        if d.module_file and d.state != "builtin":
            line += f"  ({d.module_file})"
        if d.accelerates_aes is False:
            line += "  (does not accelerate AES)"
        if d.inferred:
            line += f"  (inferred: {d.inferred})"
        out.append(line)
    return out


def _persist_text(s: Status) -> str:
    d, p = s.driver, s.persist
    if d.compiled_in:
        text = "compiled into the kernel"
    elif (p.source or "") == "appliance setting (inferred)":
        text = "inferred: by the appliance's crypto setting (config.xml not readable)"
    else:
        text = yesno(p.configured, "unknown")
        if p.inferred:
            text += f"  (inferred: {p.inferred})"
        if (p.source or "").startswith("appliance setting ("):
            text += f"  ({p.source})"
    if p.value is not None and p.source:
        text += f"  ({d.name}_load={p.value} at {p.source})"
    if p.needed is False and not d.compiled_in:
        text += "  (not needed)"
    if p.ignored:
        text += f"  (ignored by this loader: {p.ignored})"
    return text


def _geli_line(g: Any) -> str:
    cipher = " ".join(x for x in (g.encryption, g.key_length and str(g.key_length)) if x) or "cipher unknown"
    line = f"{g.name}: {cipher}"
    if g.authentication:
        line += f", {g.authentication}"
    line += f", crypto: {g.crypto or 'unknown'}"
    if g.needs_reattach:
        line += " (re-attach)"
    return line


def host_view(r: HostResult, index: int) -> dict[str, Any]:
    """Everything the page shows of one host: the table's cells and the expandable details."""
    from bsdcrypt.render import fleet

    s = r.status
    o, c = s.os, s.cpu
    cells = fleet.row(r)
    facts: list[tuple[str, str]] = []
    if r.error is None:
        cpu = c.model or "unknown CPU"
        cpu += f"; AES-NI: {yesno(c.aesni, 'unknown')}, SHA: {yesno(c.sha, 'unknown')}"
        if c.vm:
            cpu += f"; virtual machine ({c.hypervisor or 'hypervisor unknown'})"
        kernel = ", ".join(x for x in (o.arch, o.kernel_ident) if x) or "unknown"
        if o.product:
            kernel += f"; {o.product}"
        for what, rel in (("installed", o.kernel_installed), ("userland", o.userland)):
            if rel and rel != o.release:  # a pending reboot or an older userland: worth a line
                kernel += f"; {what} {rel}"
        facts = [
            ("Kernel", kernel),
            ("CPU", cpu),
            ("Driver", "\n".join(_driver_lines(s))),
            ("Persisted", _persist_text(s)),
            ("Probe user", {True: "root", False: "not root", None: "unknown"}[s.root]),
        ]
    else:
        facts = [("Not audited", f"{r.error_kind}: {r.error}")]
    if s.geli:
        facts.append(("GELI", "\n".join(_geli_line(g) for g in s.geli)))
    if r.error is None:
        from bsdcrypt.render.consumers import lines as consumer_lines

        consumers = consumer_lines(s)
        if consumers:
            facts.append(("Consumers", "\n".join(consumers)))
    if r.entry.source:
        facts.append(("Listed at", r.entry.source))
    return {
        "n": index,
        "name": r.target,
        "hostname": s.host if r.error is None and s.host not in r.target else "",
        "verdict": r.verdict,
        "vrank": VERDICTS.index(r.verdict),
        "cells": cells,
        "facts": [(k, v.replace("\n", "\n" + " " * FACT_WIDTH)) for k, v in facts],
        "finding": fleet.clip(cells["finding"]),  # as the text table clips it; the details have it whole
        "findings": [
            {"id": f.id, "severity": f.severity, "message": f.message, "remedy": f.remedy} for f in s.findings
        ],
        "failed": r.error is not None,
    }


def finding_legend(hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every finding that more than one host has word for word (id, severity, message and remedy
    alike) once, with the number of hosts that have it: most severe first, then the most hosts.
    Those hosts' findings become references into it (`ref`: the entry's number), so a remedy that
    3,000 hosts share is printed once; a finding only one host has keeps `ref` None and is printed
    in that host's details."""
    seen: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for h in hosts:
        for f in h["findings"]:
            key = (f["id"], f["severity"], f["message"], f["remedy"])
            entry = seen.setdefault(key, {**f, "hosts": 0})
            entry["hosts"] += 1
    # most severe first, as every report lists findings (status.SEVERITY_RANK), then the most hosts
    legend = sorted((e for e in seen.values() if e["hosts"] > 1),
                    key=lambda e: (-SEVERITY_RANK.get(e["severity"], -1), -e["hosts"], e["id"], e["message"]))
    for n, entry in enumerate(legend):
        entry["n"] = n
    for h in hosts:
        for f in h["findings"]:
            f["ref"] = seen[(f["id"], f["severity"], f["message"], f["remedy"])].get("n")
    return legend


# ---------------------------------------------------------------------------- charts


def _verdict_segments(counts: Counter[str]) -> tuple[svg.Segment, ...]:
    return tuple(svg.Segment(v, counts[v], f"{counts[v]} {v}") for v in VERDICTS if counts[v])


def _stacked(title: str, buckets: dict[str, Counter[str]], limit: int = 14) -> svg.Group:
    """One bar per bucket (most hosts first), its hosts stacked by verdict; the rest in 'others'."""
    ranked = sorted(buckets.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    if len(ranked) > limit:
        rest: Counter[str] = Counter()
        for _, cnt in ranked[limit - 1:]:
            rest.update(cnt)
        ranked = [*ranked[: limit - 1], (f"{len(ranked) - limit + 1} others", rest)]
    return svg.Group("", [svg.Bar(label, _verdict_segments(cnt), text=_hosts(sum(cnt.values())))
                          for label, cnt in ranked])


def _hosts(n: int) -> str:
    return f"{n} host{'' if n == 1 else 's'}"


def fleet_charts(results: Sequence[HostResult]) -> list[dict[str, Any]]:
    by_verdict: Counter[str] = Counter(r.verdict for r in results)
    by_driver: dict[str, Counter[str]] = {}
    by_release: dict[str, Counter[str]] = {}
    geli: Counter[str] = Counter()
    geli_hosts: list[str] = []
    for r in results:
        s = r.status
        if r.error is not None:
            dkey = rkey = "not audited"
        else:
            dkey = f"{s.driver.name}: {s.driver.state}" if s.driver.name else s.driver.state
            rkey = release_label(s)
        by_driver.setdefault(dkey, Counter())[r.verdict] += 1
        by_release.setdefault(rkey, Counter())[r.verdict] += 1
        stuck = False
        for g in s.geli:
            if g.needs_reattach:
                geli["software, re-attach helps"] += 1
                stuck = True
            elif g.accelerated is False:
                geli["software, no driver for it"] += 1
                stuck = True
            elif g.accelerated:
                geli[f"{g.crypto or 'accelerated'}"] += 1
            else:
                geli["crypto path unknown"] += 1
        if stuck:
            geli_hosts.append(s.host)
    charts = [
        {
            "id": "by-verdict",
            "title": "Hosts by verdict",
            "svg": svg.hbar_chart(
                [svg.Group("", [svg.Bar(v, (svg.Segment(v, by_verdict[v]),), text=_hosts(by_verdict[v]))
                                for v in VERDICTS])],
                title="Hosts by verdict",
            ),
        },
        {"id": "by-driver", "title": "Hosts by driver state",
         "svg": svg.hbar_chart([_stacked("", by_driver)], title="Hosts by driver state")},
        {"id": "by-release", "title": "Hosts by release and variant",
         "svg": svg.hbar_chart([_stacked("", by_release)], title="Hosts by release and variant")},
    ]
    if geli:
        key = {"software, re-attach helps": "critical", "software, no driver for it": "warning",
               "crypto path unknown": "unknown"}
        bars = [svg.Bar(k, (svg.Segment(key.get(k, "ok"), n),), text=f"{n} provider{'s' if n != 1 else ''}")
                for k, n in sorted(geli.items(), key=lambda kv: -kv[1])]
        charts.append({
            "id": "geli",
            "title": "GELI providers by crypto path",
            "svg": svg.hbar_chart([svg.Group("", bars)], title="GELI providers by crypto path"),
            "note": (f"on software crypto: {', '.join(geli_hosts[:20])}"
                     + (f" and {len(geli_hosts) - 20} more" if len(geli_hosts) > 20 else "")) if geli_hosts else "",
        })
    return charts


# ---------------------------------------------------------------------------- pages


def fleet_page(run: FleetRun, *, title: str, source: str, command: str) -> str:
    """The fleet report of fleet-audit or analyze: header, tiles, charts, table, details."""
    from bsdcrypt.render import fleet

    ordered = fleet.sort_results(run.results)
    by_host_order = sorted(range(len(ordered)), key=lambda i: fleet.host_order(ordered[i].entry))
    host_rank = {i: rank for rank, i in enumerate(by_host_order)}
    hosts = [host_view(r, i) for i, r in enumerate(ordered)]
    for h in hosts:
        h["hostkey"] = host_rank[h["n"]]
    totals = run.totals()
    n = len(run.results)
    meta = [
        ("Generated", _now()),
        ("By", _origin()),
        ("Input", source),
        ("Hosts", f"{n} ({run.failed} could not be audited)" if run.failed else str(n)),
        ("Tool", f"bsdcrypt {__version__}, {command}"),
    ]
    if run.parallel and run.timeout:
        meta.append(("Run", f"{run.elapsed:.1f} s, parallel {run.parallel}, timeout {run.timeout:g} s"))
    return _page(
        "fleet.html.j2",
        title=title,
        verdict=run.verdict,
        meta=meta,
        totals=totals,
        charts=fleet_charts(run.results) if n > 1 else [],
        hosts=hosts,
        legend=finding_legend(hosts),
        rows_per_body=ROWS_PER_BODY,
        headers=fleet.HEADERS,
        duplicates=run.duplicates,
        single=n == 1,
        bench=None,
    )


def status_page(status: Status, spec: str) -> str:
    """`status --format html`: the same page for one host, its details open."""
    from bsdcrypt.fleet.results import FleetRun, HostResult
    from bsdcrypt.hostsfile import HostEntry

    run = FleetRun([HostResult(HostEntry(spec=spec, source=""), status, 0.0)], 0.0, parallel=0, timeout=0.0)
    return fleet_page(run, title=f"bsdcrypt status of {visible(status.host)}", source=spec, command="status")


# ---------------------------------------------------------------------------- bench


@dataclass(frozen=True)
class BenchRun:
    """One bench record to chart: where it ran, its crypto path, its measurements."""

    label: str  # e.g. "before", "1: host 2026-12-01 10:00 (after)"
    result: BenchResult
    key: str = ""  # the run's short name in the chart ("1", "before"); none for a single run


def _whisker(m: Any) -> tuple[float, float] | None:
    if len(m.samples) < 2:
        return None
    mibs = [s.bw_bytes / (1024 * 1024) for s in m.samples]
    return (min(mibs), max(mibs))


def _crypto_key(crypto: str | None) -> str:
    return {"hardware": "hw", "accelerated software": "accel", "software": "soft"}.get(crypto or "", "unknown")


def bench_chart(runs: Sequence[BenchRun]) -> Any:
    """Per direction, a bar per run (GELI, coloured by crypto path) and its md ceiling; whiskers
    show the min..max of repeated runs."""
    groups = []
    directions = [d for d in ("write", "read") if any(br.result.get("geli", d) or br.result.get("md", d)
                                                      for br in runs)]
    for d in directions:
        bars = []
        for br in runs:
            res = br.result
            g, c = res.get("geli", d), res.get("md", d)
            if g is not None:
                bars.append(svg.Bar(
                    f"{br.key + ': ' if br.key else ''}GELI ({res.crypto or 'crypto unknown'})",
                    (svg.Segment(_crypto_key(res.crypto), g.median_mib_s),),
                    text=_mib_text(g),
                    whisker=_whisker(g),
                ))
            if c is not None:
                bars.append(svg.Bar(
                    f"{br.key + ': ' if br.key else ''}bare md (ceiling)",
                    (svg.Segment("ceiling", c.median_mib_s),),
                    text=_mib_text(c),
                    whisker=_whisker(c),
                ))
        groups.append(svg.Group(f"{d} (MiB/s, median)", bars))
    return svg.hbar_chart(groups, title="GELI throughput and the md ceiling", width=800, label_width=270,
                          value_width=230)


def _mib_text(m: Any) -> str:
    text = f"{m.median_mib_s:.0f} MiB/s"
    return text if m.single else f"{text} ({len(m.samples)} runs, spread {m.spread_pct or 0:.1f}%)"


def speedup_texts(speedup: Speedup | None) -> list[str]:
    """enable --bench's before/after ratios as tile texts ("write: 5.3x")."""
    if speedup is None:
        return []
    return [f"{d}: {r:.1f}x" for d, r in speedup.ratio.items() if r is not None]


def bench_view(runs: Sequence[BenchRun], ratios: Sequence[str] = (), note: str = "") -> dict[str, Any]:
    rows = []
    for br in runs:
        res = br.result
        h, p = res.host, res.params
        for m in res.measurements:
            rows.append({
                "run": br.label,
                "host": h.hostname or "?",
                "started": res.started,
                "dir": m.direction,
                "target": f"GELI on md ({res.crypto or '?'})" if m.target == "geli" else "bare md (ceiling)",
                "crypto": res.crypto or "unknown",
                "mib": f"{m.median_mib_s:.0f}",
                "iops": f"{m.median_iops:.0f}",
                "spread": "single run" if m.single else f"{m.spread_pct or 0:.1f}% ({len(m.samples)} runs)",
                "params": f"{res.geli_algorithm or p.ealgo} {res.geli_keylength or p.keylen}, sector {p.sectorsize}, "
                          f"bs={p.bs} iodepth={p.iodepth} jobs={res.numjobs} {p.runtime_s}s",
            })
    hosts = []
    for br in runs:
        h = br.result.host
        hosts.append({
            "run": br.label,
            "host": h.hostname or "?",
            "system": " ".join(x for x in (h.release, h.arch) if x) or "unknown",
            "cpu": f"{h.cpu_model or 'unknown CPU'} ({h.ncpu or '?'} CPUs)",
            "driver": f"{h.driver or '-'}: {h.driver_state}",
            "fio": br.result.fio_version or "?",
            "context": br.result.context or "",
            "warnings": list(br.result.warnings),
        })
    return {
        "chart": bench_chart(runs) if runs else None,
        "legend": [(br.key, br.label) for br in runs if br.key and br.key != br.label],
        "rows": rows,
        "hosts": hosts,
        "speedup": list(ratios),
        "note": note,
    }


def bench_page(runs: Sequence[BenchRun], *, title: str, command: str, source: str,
               ratios: Sequence[str] = (), note: str = "") -> str:
    """`bench --format html`, `enable --bench --bench-html` and `bench --compare --format html`."""
    meta = [
        ("Generated", _now()),
        ("By", _origin()),
        ("Input", source),
        ("Runs", str(len(runs))),
        ("Tool", f"bsdcrypt {__version__}, {command}"),
    ]
    return _page("bench.html.j2", title=title, meta=meta, bench=bench_view(runs, ratios, note))


def userland_page(u: UserlandResult, host: HostFacts | None, *, source: str, saved: str = "") -> str:
    """`bench --userland --format html`: userland OpenSSL's bulk throughput per cipher, as it runs
    and with AES-NI masked, charted; the advice; where it ran."""
    mib = 1024 * 1024
    bars, rows = [], []
    for c in u.ciphers:
        for value, key, label in ((c.bytes_per_s, "accel", c.cipher),
                                  (c.masked_bytes_per_s, "soft", f"{c.cipher}, AES-NI masked")):
            if value is not None:
                bars.append(svg.Bar(label, (svg.Segment(key, value / mib),), text=f"{value / mib:.0f} MiB/s"))
        ratio = (f"{c.bytes_per_s / c.masked_bytes_per_s:.1f}x" if c.bytes_per_s and c.masked_bytes_per_s
                 else "-")
        rows.append({
            "cipher": c.cipher,
            "mib": "-" if c.bytes_per_s is None else f"{c.bytes_per_s / mib:.0f}",
            "masked": "-" if c.masked_bytes_per_s is None else f"{c.masked_bytes_per_s / mib:.0f}",
            "ratio": ratio,
        })
    chart = (svg.hbar_chart([svg.Group("MiB/s, 16 KiB blocks", bars)], title="userland OpenSSL throughput",
                            width=800, label_width=270, value_width=130) if bars else None)
    name = (host.hostname if host else None) or source
    view = {
        "chart": chart,
        "rows": rows,
        "masked": any(c.masked_bytes_per_s is not None for c in u.ciphers),
        "prefer": u.prefer,
        "advice": u.advice,
        "version": u.openssl_version or "?",
        "host": name,
        "system": " ".join(x for x in ((host.release, host.arch) if host else ()) if x) or "unknown",
        "cpu": f"{host.cpu_model or 'unknown CPU'} ({host.ncpu or '?'} CPUs)" if host else "unknown",
        "saved": saved,
    }
    meta = [
        ("Generated", _now()),
        ("By", _origin()),
        ("Input", source),
        ("Tool", f"bsdcrypt {__version__}, bench --userland"),
    ]
    return _page("userland.html.j2", title=f"bsdcrypt userland bench of {visible(name)}", meta=meta, u=view)
