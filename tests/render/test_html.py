"""`--format html` without a browser: structure, escaping, the CSP and its hashes, the CLI paths.
The browser tests (tests/render/test_html_browser.py) open the same pages in headless Chromium."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from htmlcheck import FIXTURES, HOSTILE_CPU, HOSTILE_NAME, HOSTILE_VALUE, REPO, hostile_recording

from bsdcrypt import fleet
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.hostsfile import HostEntry
from bsdcrypt.pipeline import status_of
from bsdcrypt.render import fleet as fleet_render
from bsdcrypt.render import html
from bsdcrypt.render.html import visible


class Page(HTMLParser):
    """Every element with its attributes and text, enough to check a report's structure."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[dict[str, Any]] = []
        self.done: list[dict[str, Any]] = []
        self.feed(text)

    def _close(self, *tags: str) -> None:
        """</td> and </tr> are optional in HTML (the report leaves them out): a new cell closes a cell, a
        new row or the body's end closes the row (and its last cell)."""
        for tag in tags:
            if self.stack and self.stack[-1]["tag"] == tag:
                self.handle_endtag(tag)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "td":
            self._close("td")
        elif tag == "tr":
            self._close("td", "tr")
        self.elements.append((tag, dict(attrs)))
        if tag not in ("meta", "br", "input", "path", "rect", "col"):
            self.stack.append({"tag": tag, "attrs": dict(attrs), "text": ""})

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("meta", "br", "input", "path", "rect", "col"):
            return
        if tag == "tr":
            self._close("td")
        elif tag in ("tbody", "table"):
            self._close("td", "tr")
        node = self.stack.pop()
        assert node["tag"] == tag, f"</{tag}> closes <{node['tag']}>"
        self.done.append(node)
        if self.stack:
            self.stack[-1]["text"] += node["text"]

    def handle_data(self, data: str) -> None:
        if self.stack:
            self.stack[-1]["text"] += data

    def find(self, tag: str, cls: str | None = None) -> list[dict[str, Any]]:
        return [n for n in self.done if n["tag"] == tag and (cls is None or cls in (n["attrs"].get("class") or "").split())]


def results_from(paths: list[Path]) -> list[fleet.HostResult]:
    out = []
    for i, path in enumerate(paths):
        entry = HostEntry(spec=f"replay:{path.name}", source=f"hosts.txt:{i + 1}", replay=str(path))
        out.append(fleet.HostResult(entry, status_of(ReplayHost.from_file(path)), 0.01))
    failed = HostEntry(spec="db1.example.org", source="hosts.txt:99", host="db1.example.org")
    out.append(fleet.HostResult(failed, fleet.failed_status(failed, "refused", "connection refused"), 0.01,
                                "connection refused", "refused"))
    return out


@pytest.fixture(scope="module")
def recordings_run() -> fleet.FleetRun:
    return fleet.FleetRun(results_from(sorted(FIXTURES.glob("*.yaml"))), 1.0, 8, 30.0)


@pytest.fixture(scope="module")
def page_text(recordings_run: fleet.FleetRun) -> str:
    return html.fleet_page(recordings_run, title="fleet", source="hosts.txt", command="fleet-audit")


def test_every_row_of_the_text_table_in_its_order(recordings_run: fleet.FleetRun, page_text: str) -> None:
    page = Page(page_text)
    body_rows = [n for n in page.find("tr") if n["attrs"].get("data-v")]
    ordered = fleet_render.sort_results(recordings_run.results)
    assert len(body_rows) == len(ordered)
    for node, r in zip(body_rows, ordered, strict=True):
        cells = fleet_render.row(r)
        assert node["attrs"]["data-v"] == r.verdict
        for value in (cells["host"], cells["os"], cells["driver"], fleet_render.clip(cells["finding"])):
            assert visible(value) in node["text"]
    failed = next(n for n in body_rows if "db1.example.org" in n["text"])
    assert "refused: connection refused" in failed["text"] and "failed" in failed["attrs"]["class"]


def test_every_finding_has_its_remedy_in_a_copyable_block(recordings_run: fleet.FleetRun, page_text: str) -> None:
    """A finding several hosts have word for word is listed once with its remedy in a <pre>, and each
    of those hosts' details links to it (class by severity); a finding only one host has is in its
    details, whole, with its remedy in a <pre>."""
    page = Page(page_text)
    legend = {n["attrs"]["id"]: n["text"] for n in page.find("li") if (n["attrs"].get("id") or "").startswith("f")}
    ordered = fleet_render.sort_results(recordings_run.results)
    findings = [(f.id, f.severity, f.message, f.remedy) for r in ordered for f in r.status.findings]
    shared = {k for k in findings if findings.count(k) > 1}
    own = [k for k in findings if k not in shared]
    assert shared and own  # the recordings have both kinds
    assert len(legend) == len(shared) and len(page.find("pre")) == len(shared) + len(own)
    details = page.find("details")
    assert len(details) == len(ordered)
    links = iter(n["attrs"] for n in page.find("a") if (n["attrs"].get("href") or "").startswith("#f"))
    for node, r in zip(details, ordered, strict=True):
        for f in r.status.findings:
            key = (f.id, f.severity, f.message, f.remedy)
            if key in shared:
                link = next(links)
                text = legend[(link["href"] or "")[1:]]
                assert link["class"] == f"b-{f.severity}" and f.id in text
            else:
                text = node["text"]
            assert visible(f.message) in text and visible(f.remedy) in text
    assert next(links, None) is None
    for key in shared:  # printed once, however many hosts have it (and one <pre> per entry, above)
        assert sum(visible(key[2]) in n["text"] for n in page.find("li")) == 1


def test_tiles_and_charts_count_the_hosts(recordings_run: fleet.FleetRun, page_text: str) -> None:
    page = Page(page_text)
    tiles = {n["attrs"]["data-verdict"]: n["text"] for n in page.find("a", "tile")}
    for verdict, n in recordings_run.totals().items():
        assert tiles[verdict].startswith(str(n))
    figures = {n["attrs"]["id"] for n in page.find("figure")}
    assert {"by-verdict", "by-driver", "by-release"} <= figures
    assert "geli" in figures  # the shipped recordings have GELI providers, one stuck in software
    assert "on software crypto:" in page_text


def _csp(page: Page) -> str:
    metas = [a for t, a in page.elements if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert len(metas) == 1
    return metas[0]["content"] or ""


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_strict_csp_names_the_one_script_and_style_by_hash(page_text: str) -> None:
    page = Page(page_text)
    csp = _csp(page)
    assert "default-src 'none'" in csp and "unsafe" not in csp and "base-uri 'none'" in csp
    (script,) = re.findall(r"<script>(.*?)</script>", page_text, re.S)
    (style,) = re.findall(r"<style>(.*?)</style>", page_text, re.S)
    assert f"script-src {_sha(script)}" in csp
    assert f"style-src {_sha(style)}" in csp


def test_nothing_can_load_or_run_from_elsewhere(page_text: str) -> None:
    page = Page(page_text)
    for tag, attrs in page.elements:
        assert tag not in ("img", "iframe", "link", "object", "embed", "base", "form"), tag
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            assert name not in ("style", "src", "srcset", "action"), (tag, name)
            if name == "href":
                assert (value or "").startswith("#"), value
            assert "data:" not in (value or "") and "javascript:" not in (value or ""), (tag, name, value)
    urls = set(re.findall(r"[a-z]+://[^\s\"'<>)]+", page_text))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls


def test_hostile_text_is_escaped_and_controls_are_spelled_out(tmp_path: Path) -> None:
    rec = hostile_recording(tmp_path)
    run = fleet.FleetRun(results_from([rec, FIXTURES / "freebsd-13.0-hyperv-builtin.yaml"]), 0.1, 1, 1.0)
    text = html.fleet_page(run, title="fleet", source=str(rec), command="fleet-audit")
    page = Page(text)
    assert text.count("<script") == 1 and "<img" not in text and "<b onmouseover" not in text
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    spelled = visible(HOSTILE_NAME)
    assert "\\x1b[31m" in spelled and "\\u202e" in spelled
    summaries = [n["text"] for n in page.find("summary")]
    assert any(spelled in s for s in summaries)
    facts = " ".join(n["text"] for n in page.find("p", "kv"))
    assert visible(HOSTILE_CPU) in facts
    assert HOSTILE_VALUE in facts  # the aesni_load value, as text
    assert Page(text).find("script") and len(Page(text).find("script")) == 1


def test_visible_spells_controls_and_bidi_but_keeps_text() -> None:
    assert visible("a\x1b[0m\x00\x7f\x9b\u202e\u2066b") == "a\\x1b[0m\\x00\\x7f\\x9b\\u202e\\u2066b"
    assert visible("fw1 — 13.2-RELEASE ✓ x\ny") == "fw1 — 13.2-RELEASE ✓ x\ny"  # lines kept
    assert visible("a\tb") == "a\\x09b"
    assert visible(None) == ""
    long = visible("x" * 1100 + "\nshort")
    assert long.startswith("x" * 1024 + "…[76 more characters]\n") and long.endswith("\nshort")


@pytest.mark.slow
def test_release_labels() -> None:
    labels = {p.stem: html.release_label(status_of(ReplayHost.from_file(p))) for p in FIXTURES.glob("*.yaml")}
    assert labels["freebsd-12.2-bhyve-not-loaded-overridden"] == "FreeBSD 12.2-RELEASE"
    assert labels["hardenedbsd-13.0-stable-epyc-builtin"].startswith("HardenedBSD 13.0-STABLE")
    assert labels["pfsense-2.4.5-i5-4590s-loaded"] == "pfSense 2.4.5"
    assert labels["opnsense-21.1-hbsd12.1-xen-viridian-loaded"] == "OPNsense 21.1"
    assert labels["linux-debian12-local"] == "Debian GNU/Linux 12 (bookworm)"


# ---------------------------------------------------------------------------- the commands




@pytest.mark.slow
def test_status_html_for_one_host(tmp_path: Path) -> None:
    out = tmp_path / "status.html"
    proc = run_cli("status", "--host", "replay:freebsd-12.2-bhyve-geli-software-aesni-kldloaded", "-f", "html",
                   "-o", str(out))
    assert proc.returncode == 2, proc.stderr  # critical: a GELI provider stuck on software crypto
    page = Page(out.read_text())
    (details,) = page.find("details")
    assert "open" in details["attrs"]
    assert "geli-software" in details["text"] and page.find("figure") == []  # no charts for one host


@pytest.mark.slow
def test_fleet_audit_and_analyze_write_html(tmp_path: Path) -> None:
    names = sorted(FIXTURES.glob("*.yaml"))[:5]
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("".join(f"replay:{p}\n" for p in names))
    out = tmp_path / "fleet.html"
    proc = run_cli("fleet-audit", str(hosts), "--format", "html", "-o", str(out), "-q")
    assert proc.returncode in (0, 1, 2, 3) and proc.stderr == "", proc.stderr
    page = Page(out.read_text())
    assert len([n for n in page.find("tr") if n["attrs"].get("data-v")]) == 5
    assert "fleet-audit" in out.read_text() and str(hosts) in out.read_text()
    proc = run_cli("analyze", *map(str, names), "--format", "html")
    assert proc.stdout.startswith("<!DOCTYPE html>") and proc.stdout.rstrip().endswith("</html>")
    assert len([n for n in Page(proc.stdout).find("tr") if n["attrs"].get("data-v")]) == 5


@pytest.mark.slow
def test_unknown_format_lists_html() -> None:
    proc = run_cli("status", "--host", "replay:freebsd-13.0-hyperv-builtin", "-f", "htm")
    assert proc.returncode == 3 and "html" in proc.stderr


@pytest.mark.slow
def test_status_table_does_not_import_jinja2() -> None:
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('JINJA' if 'jinja2' in sys.modules else 'NONE', file=sys.stderr))\n"
        "sys.argv = ['bsdcrypt', 'status', '--host', 'replay:freebsd-13.0-hyperv-builtin']\n"
        "from bsdcrypt.cli import main\nmain()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.stderr.strip().endswith("NONE"), proc.stderr
    html_code = code.replace("hyperv-builtin']", "hyperv-builtin', '-f', 'html']")
    proc = subprocess.run([sys.executable, "-c", html_code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.stderr.strip().endswith("JINJA"), proc.stderr  # the check itself can see an import
