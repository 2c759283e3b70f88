"""A 5,000-host `--format html` report: its size, the time to render it, and the time headless
Chromium takes until the whole page is there, beside baselines in the same run.

Goal (issue 14): under 5 MB and rendered in headless Chromium in under 3 s on the dev machine.
The hosts are the shipped recordings assessed once and repeated under numbered names (the page
holds each host's own text, so the size is what 5,000 such hosts give). The baselines, opened in
the same browser, interleaved run by run with the report: the same table as bare HTML (no charts,
details, style or script: what any HTML table of the fleet costs) and, with `--against REV`, the
page that commit's bsdcrypt renders from the same fleet.

    python benchmarks/html_bench.py [--hosts 5000] [--runs 5] [--against REV] [--unique-findings] [--keep DIR]

`--unique-findings` gives every finding of every host its own text (the host's name in its message
and remedy), so nothing can be shared between hosts: the size of a fleet whose findings all quote
host-specific things.

Per page and run: first contentful paint; the load event; "complete": the second animation frame
after the load event with the whole page's style and layout forced, i.e. everything parsed, the
script run, and what is in view painted: what a user waits for before the page is all there and
sorts and filters (page clock, from navigation start); and the CPU time Chromium's renderer
processes spent on it, which the machine's load does not inflate as much as wall time.

Needs chromium, chromium-driver and selenium (the test extras). Offline: the browser resolves
no name and its proxy is a closed loopback port.
"""

from __future__ import annotations

import argparse
import copy
import html as stdhtml
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

COMPLETE = (
    "const done = arguments[arguments.length - 1];"
    "document.body.getBoundingClientRect();"  # force style and layout of the whole page
    "requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now())));"
)
TIMES = (
    "const n = performance.getEntriesByType('navigation')[0];"
    "const p = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint');"
    "return [p ? p.startTime : -1, n.loadEventEnd];"
)


def make_run(n: int, unique: bool = False):  # type: ignore[no-untyped-def]
    from bsdcrypt import fleet
    from bsdcrypt.hosts.replay import ReplayHost
    from bsdcrypt.hostsfile import HostEntry
    from bsdcrypt.pipeline import status_of

    recs = sorted((ROOT / "fixtures" / "hosts").glob("*.yaml"))
    statuses = [status_of(ReplayHost.from_file(p)) for p in recs]
    results = []
    for i in range(n):
        s = copy.deepcopy(statuses[i % len(statuses)])
        name = f"host{i:05d}.dc{i % 7}.example.org"
        s.host = name
        if unique:
            s.findings = [type(f)(f.id, f.severity, f"{f.message} (on {name})", f"{f.remedy}   # on {name}")
                          for f in s.findings]
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


def page_of(hosts: int, unique: bool, out: Path, rev: str | None) -> float:
    """Render the report into `out` with this tree's bsdcrypt, or with commit `rev`'s (its package
    unpacked from git into a temp folder, run in a child process with this tree's fleet maker)."""
    if rev is None:
        from bsdcrypt.render.html import fleet_page

        run = make_run(hosts, unique)
        t0 = time.perf_counter()
        out.write_text(fleet_page(run, title="bsdcrypt fleet audit", source="hosts.txt", command="fleet-audit"),
                       encoding="utf-8")
        return time.perf_counter() - t0
    tree = Path(tempfile.mkdtemp(prefix="bsdcrypt-rev-"))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "bsdcrypt"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        code = (
            "import sys, time; sys.path.insert(0, sys.argv[2]); import html_bench;"
            "sys.path[:] = [sys.argv[1]] + [p for p in sys.path if not p.startswith(str(html_bench.ROOT))];"
            "from bsdcrypt.render.html import fleet_page;"
            "assert fleet_page.__code__.co_filename.startswith(sys.argv[1]);"
            "run = html_bench.make_run(int(sys.argv[3]), sys.argv[4] == '1'); t0 = time.perf_counter();"
            "open(sys.argv[5], 'w', encoding='utf-8').write(fleet_page(run, title='bsdcrypt fleet audit',"
            " source='hosts.txt', command='fleet-audit')); print(time.perf_counter() - t0)"
        )
        env = {**os.environ, "PYTHONPATH": str(tree)}
        proc = subprocess.run([sys.executable, "-c", code, str(tree), str(Path(__file__).parent), str(hosts),
                               "1" if unique else "0", str(out)], env=env, check=True, capture_output=True,
                              text=True, cwd=tree)
        return float(proc.stdout.strip())
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def renderer_cpu_ms() -> dict[str, int]:
    """CPU time (user + system, ms) of each Chromium renderer process now running."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # Chromium rewrites its argv into one space-joined string; its own UI's renderer is not the page's
        if b"chromium" in cmd and b"--type=renderer" in cmd and b"--top-chrome-webui" not in cmd:
            out[pid] = (int(fields[11]) + int(fields[12])) * 1000 // tick
    return out


def measure(driver: Any, path: Path) -> dict[str, float]:
    driver.get("about:blank")
    before = renderer_cpu_ms()
    driver.get(path.as_uri())  # returns after the load event
    complete = float(driver.execute_async_script(COMPLETE))
    fcp, load = driver.execute_script(TIMES)
    after = renderer_cpu_ms()
    cpu = sum(ms - before.get(pid, 0) for pid, ms in after.items())
    return {"fcp": float(fcp), "load": float(load), "complete": complete, "cpu": float(cpu)}


def frames_after(driver: Any, action: str) -> float:
    """ms from running `action` in the page to the second frame after it (its layout and paint done)."""
    return float(driver.execute_async_script(
        "const done = arguments[arguments.length - 1]; const t0 = performance.now();" + action +
        "; document.body.getBoundingClientRect();"
        "requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));"
    ))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--against", metavar="REV", help="also measure the page git commit REV renders")
    ap.add_argument("--unique-findings", action="store_true", help="no finding text shared between hosts")
    ap.add_argument("--keep", help="write the pages into this folder (else a temp folder, removed)")
    args = ap.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bsdcrypt-html-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    pages: dict[str, Path] = {"report": folder / "fleet.html"}
    secs = page_of(args.hosts, args.unique_findings, pages["report"], None)
    print(f"rendered by bsdcrypt in {secs:.2f} s")
    if args.against:
        pages[args.against] = folder / "against.html"
        secs = page_of(args.hosts, args.unique_findings, pages[args.against], args.against)
        print(f"{args.against}: rendered in {secs:.2f} s")
    pages["bare table"] = folder / "baseline.html"
    pages["bare table"].write_text(baseline_page(make_run(args.hosts, args.unique_findings)), encoding="utf-8")
    for name, path in pages.items():
        size = path.stat().st_size
        print(f"{name:>12}: {size / 1e6:5.2f} MB ({size / args.hosts:4.0f} B/host)")

    from htmlcheck import Browser

    b = Browser(folder / "profile")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in pages}
    try:
        b.driver.get(pages["report"].as_uri())  # a first load warms the browser's caches for every page alike
        for _ in range(args.runs):
            for name, path in pages.items():  # interleaved: the machine's load falls on every page alike
                results[name].append(measure(b.driver, path))
        print(f"chromium, median of {args.runs} (max), ms from navigation start:")
        for name, rs in results.items():
            def med(key: str, rs: list[dict[str, float]] = rs) -> str:
                values = [r[key] for r in rs]
                return f"{statistics.median(values):6.0f} ({max(values):.0f})"
            print(f"{name:>12}: complete {med('complete')}  load event {med('load')}  "
                  f"first contentful paint {med('fcp')}  renderer CPU {med('cpu')}")
        messages = [m for m in b.console() if m.get("level") in ("SEVERE", "WARNING")]
        print(f"console messages: {len(messages)}")
        b.open(pages["report"])
        b.wait(lambda d: not d.execute_script("return document.getElementById('controls').hidden"))
        rows = b.js("return document.querySelectorAll('#host-table tbody tr').length")
        sort = frames_after(b.driver, "document.querySelector(\"th[data-col='1'] button\").click()")
        filt = frames_after(b.driver, "const f = document.getElementById('filter'); f.value = 'opnsense';"
                            "f.dispatchEvent(new Event('input'))")
        shown = b.js("return Array.from(document.querySelectorAll('#host-table tbody tr')).filter(r => !r.hidden)"
                     ".length")
        clear = frames_after(b.driver, "const f = document.getElementById('filter'); f.value = '';"
                             "f.dispatchEvent(new Event('input'))")
        print(f"in the report ({rows} rows): sort by OS {sort:.0f} ms, filter 'opnsense' {filt:.0f} ms "
              f"({shown} shown), filter cleared {clear:.0f} ms (to the second frame after)")
    finally:
        b.close()
        print(f"load average after: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
