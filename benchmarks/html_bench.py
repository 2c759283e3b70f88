"""A 5,000-host `--format html` report: its size, the time to render it, and the time headless
Chromium takes to load and lay it out, beside a baseline page in the same run.

Goal (issue 14): under 5 MB and rendered in headless Chromium in under 3 s on the dev machine.
The hosts are the shipped recordings assessed once and repeated under numbered names (the page
holds each host's own text, so the size is what 5,000 such hosts give). The baseline is the same
table as bare HTML (no charts, details, style or script): what any HTML table of the fleet costs.

    python benchmarks/html_bench.py [--hosts 5000] [--runs 3] [--keep DIR]

Needs chromium, chromium-driver and selenium (the test extras). Offline: the browser resolves
no name and its proxy is a closed loopback port.
"""

from __future__ import annotations

import argparse
import copy
import html as stdhtml
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def make_run(n: int):  # type: ignore[no-untyped-def]
    from bsdcrypt import fleet
    from bsdcrypt.hostsfile import HostEntry
    from bsdcrypt.pipeline import status_of
    from bsdcrypt.recording import ReplayHost

    recs = sorted((ROOT / "fixtures" / "hosts").glob("*.yaml"))
    statuses = [status_of(ReplayHost.from_file(p)) for p in recs]
    results = []
    for i in range(n):
        s = copy.deepcopy(statuses[i % len(statuses)])
        name = f"host{i:05d}.dc{i % 7}.example.org"
        s.host = name
        entry = HostEntry(spec=f"root@{name}", source=f"hosts.txt:{i + 1}", host=name, user="root")
        if i % 97 == 0:  # a few unreachable hosts, as a real fleet has
            s = fleet.failed_status(entry, "timeout", f"no answer from {name} port 22 within 30 s")
            results.append(fleet.HostResult(entry, s, 30.0, s.findings[0].message, "timeout"))
        else:
            results.append(fleet.HostResult(entry, s, 0.4))
    return fleet.FleetRun(results, 95.0, 32, 30.0)


def baseline_page(run) -> str:  # type: ignore[no-untyped-def]
    from bsdcrypt.render import fleet as fleet_render

    head = "".join(f"<th>{stdhtml.escape(h)}</th>" for h in fleet_render.HEADERS.values())
    rows = []
    for r in fleet_render.sort_results(run.results):
        cells = fleet_render.row(r)
        rows.append("<tr>" + "".join(f"<td>{stdhtml.escape(cells[k])}</td>" for k in fleet_render.HEADERS) + "</tr>")
    return f"<!DOCTYPE html><meta charset=utf-8><title>baseline</title><table><tr>{head}</tr>{''.join(rows)}</table>"


def browser_ms(driver, path: Path) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(wall ms from navigation to a frame painted after load, the load event's ms)."""
    t0 = time.perf_counter()
    driver.get(path.as_uri())  # returns after the load event
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "document.body.getBoundingClientRect();"  # force style and layout of the whole page
        "requestAnimationFrame(() => requestAnimationFrame(() => done()));"
    )
    wall = (time.perf_counter() - t0) * 1000
    load = driver.execute_script("return performance.getEntriesByType('navigation')[0].loadEventEnd")
    return wall, float(load)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", help="write the pages into this folder (else a temp folder, removed)")
    args = ap.parse_args()
    from bsdcrypt.render.html import fleet_page

    run = make_run(args.hosts)
    t0 = time.perf_counter()
    page = fleet_page(run, title="bsdcrypt fleet audit", source="hosts.txt", command="fleet-audit")
    render_s = time.perf_counter() - t0
    base = baseline_page(run)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bsdcrypt-html-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    report, baseline = folder / "fleet.html", folder / "baseline.html"
    report.write_text(page, encoding="utf-8")
    baseline.write_text(base, encoding="utf-8")
    size, bsize = report.stat().st_size, baseline.stat().st_size
    print(f"{args.hosts} hosts: report {size / 1e6:.2f} MB ({size / args.hosts:.0f} B/host), "
          f"baseline table {bsize / 1e6:.2f} MB; rendered by bsdcrypt in {render_s:.2f} s")

    from htmlcheck import Browser

    b = Browser(folder / "profile")
    try:
        for name, path in (("report", report), ("baseline", baseline)):
            walls, loads = [], []
            for _ in range(args.runs):
                b.driver.get("about:blank")
                wall, load = browser_ms(b.driver, path)
                walls.append(wall)
                loads.append(load)
            print(f"chromium {name:8}: loaded+painted median {statistics.median(walls):6.0f} ms "
                  f"(max {max(walls):.0f}), load event median {statistics.median(loads):6.0f} ms, {args.runs} runs")
        errors = [m for m in b.console() if m.get("level") in ("SEVERE", "WARNING")]
        print(f"console messages: {len(errors)}")
        rows = b.js("return document.querySelectorAll('#host-table tbody tr').length")
        b.open(report)
        t0 = time.perf_counter()
        b.js("document.querySelector(\"th[data-col='1'] button\").click()")
        sort_ms = (time.perf_counter() - t0) * 1000
        print(f"sort {args.hosts} rows by OS in the browser: {sort_ms:.0f} ms (table rows in baseline page: {rows})")
    finally:
        b.close()
    if not args.keep:
        for p in folder.rglob("*"):
            if p.is_file():
                try:
                    os.unlink(p)
                except OSError:
                    pass


if __name__ == "__main__":
    main()
