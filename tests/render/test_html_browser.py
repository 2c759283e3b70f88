"""The HTML reports in a real browser: headless Chromium (Debian's chromium + chromium-driver, via
Selenium), offline. Reports from the shipped recordings, a hostile recording, one host's status and a
bench; the loopback sshd fleet's report is tested in tests/fleet/test_fleet_html.py.

Every wait is for a condition (a sort marker, a row count), with a generous deadline only as a net."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from htmlcheck import (
    CHROMEDRIVER,
    CHROMIUM,
    FIXTURES,
    HOSTILE_CPU,
    HOSTILE_NAME,
    HOSTILE_VALUE,
    Browser,
    hostile_recording,
    png_size,
    require_browser,
    visible_rows,
)

from bsdcrypt import fleet
from bsdcrypt.hostsfile import HostEntry
from bsdcrypt.render import fleet as fleet_render
from bsdcrypt.render import html
from bsdcrypt.render.html import visible
from render.test_html import results_from


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    require_browser()
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()


def assert_clean(b: Browser, url: str) -> None:
    """No console message (a CSP violation, a script error) and no request but the file itself."""
    messages = [m for m in b.console() if m.get("level") in ("SEVERE", "WARNING")]
    assert messages == [], messages
    assert set(b.requests()) <= {url}, b.requests()


def click(b: Browser, css: str) -> None:
    from selenium.webdriver.common.by import By

    b.wait(lambda d: d.find_element(By.CSS_SELECTOR, css).is_displayed())
    b.driver.find_element(By.CSS_SELECTOR, css).click()


@pytest.fixture(scope="module")
def fleet_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, fleet.FleetRun]:
    run = fleet.FleetRun(results_from(sorted(FIXTURES.glob("*.yaml"))), 2.5, 32, 30.0)
    path = tmp_path_factory.mktemp("html") / "fleet.html"
    path.write_text(html.fleet_page(run, title="bsdcrypt fleet audit", source="hosts.txt", command="fleet-audit"))
    return path, run


@pytest.mark.slow
def test_fleet_report_sorts_and_filters_offline(browser: Browser, fleet_file: tuple[Path, fleet.FleetRun]) -> None:
    path, run = fleet_file
    b = browser
    b.console(), b.requests()  # drop what an earlier page left in the logs
    url = b.open(path)
    b.wait(lambda d: not d.execute_script("return document.getElementById('controls').hidden"))
    rows = visible_rows(b)
    assert len(rows) == len(run.results)
    ranks = [r["vk"] for r in rows]
    assert ranks == sorted(ranks)  # needing action first, as the text table

    click(b, "th[data-col='0'] button")  # host: ascending in host order
    b.wait(lambda d: d.execute_script("return document.querySelector(\"th[data-col='0']\").ariaSort") == "ascending")
    assert [r["hk"] for r in visible_rows(b)] == list(range(len(rows)))
    click(b, "th[data-col='0'] button")
    b.wait(lambda d: d.execute_script("return document.querySelector(\"th[data-col='0']\").ariaSort") == "descending")
    assert [r["hk"] for r in visible_rows(b)] == list(reversed(range(len(rows))))
    click(b, "th[data-verdict-col] button")  # verdict (its column index moves as columns are added)
    b.wait(lambda d: d.execute_script("return document.querySelector(\"th[data-verdict-col]\").ariaSort") == "ascending")
    assert [r["vk"] for r in visible_rows(b)] == sorted(ranks)

    from selenium.webdriver.common.by import By

    box = b.driver.find_element(By.ID, "filter")
    box.send_keys("opnsense")
    want = sum(1 for r in run.results if "opnsense" in " ".join(fleet_render.row(r).values()).lower())
    assert 0 < want < len(rows)
    b.wait(lambda d: len(visible_rows(b)) == want)
    assert all("OPNsense" in r["os"] for r in visible_rows(b))
    assert b.js("return document.getElementById('count').textContent") == f"{want} of {len(rows)} hosts shown"
    from selenium.webdriver.common.keys import Keys

    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)  # typed away: an input event, as a user's
    b.wait(lambda d: len(visible_rows(b)) == len(rows))

    click(b, ".chip[data-verdict='ok']")  # hide the OK hosts
    b.wait(lambda d: len(visible_rows(b)) == len(rows) - run.totals()["ok"])
    assert all(r["v"] != "ok" for r in visible_rows(b))
    click(b, ".chip[data-verdict='ok']")
    b.wait(lambda d: len(visible_rows(b)) == len(rows))

    click(b, "#host-table tbody tr a")  # the host link opens its details
    b.wait(lambda d: d.execute_script("return document.querySelector(location.hash).closest('details').open"))
    # opened, the details show each finding they link to whole, its remedy with a copy button
    shown = ("const d = document.querySelector(location.hash).closest('details');"
             "const ids = Array.from(d.querySelectorAll('p.kv a')).map(a => a.textContent);"
             "const items = Array.from(d.querySelectorAll('ol li')).filter(li => li.querySelector('pre button.copy'));"
             "return [ids.length, ids.every(id => items.some(li => li.querySelector('code').textContent === id))];")
    b.wait(lambda d: d.execute_script(shown)[1])
    if b.js(shown)[0] == 0:  # the first host shares nothing: look at one that does
        b.js("location.hash = document.querySelector('#details p.kv a').closest('details').querySelector('summary').id")
        b.wait(lambda d: d.execute_script(shown)[0] > 0 and d.execute_script(shown)[1])
    assert_clean(b, url.split("#")[0])
    shot = b.screenshot("fleet.png")
    width, height = png_size(shot)
    assert width >= 1000 and height > 1000


@pytest.mark.slow
def test_report_reads_the_same_without_javascript(tmp_path: Path, fleet_file: tuple[Path, fleet.FleetRun]) -> None:
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}",
                "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND"):
        opts.add_argument(arg)
    opts.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        path, run = fleet_file
        d.get(path.as_uri())
        from selenium.webdriver.common.by import By

        rows = d.find_elements(By.CSS_SELECTOR, "#host-table tbody tr")
        assert len(rows) == len(run.results) and all(r.is_displayed() for r in rows)
        assert not d.find_element(By.ID, "controls").is_displayed()  # no dead controls without the script
        assert d.find_elements(By.CSS_SELECTOR, "th button") == []  # the script did not run
        assert len(d.find_elements(By.CSS_SELECTOR, "svg.chart")) >= 3
    finally:
        d.quit()


def test_hostile_text_shows_as_text(browser: Browser, tmp_path: Path) -> None:
    rec = hostile_recording(tmp_path)
    run = fleet.FleetRun(results_from([rec, FIXTURES / "freebsd-13.0-hyperv-builtin.yaml"]), 0.1, 1, 1.0)
    path = tmp_path / "hostile.html"
    path.write_text(html.fleet_page(run, title=f"audit of {HOSTILE_NAME}", source=str(rec), command="fleet-audit"))
    b = browser
    b.console(), b.requests()
    url = b.open(path)
    b.wait(lambda d: not d.execute_script("return document.getElementById('controls').hidden"))
    assert b.js("return window.__pwned === undefined")
    assert b.js("return document.scripts.length") == 1 and b.js("return document.images.length") == 0
    assert b.js("return document.querySelectorAll('[onmouseover],[onerror]').length") == 0
    summaries = b.js("return Array.from(document.querySelectorAll('details summary')).map(s => s.textContent)")
    assert any(visible(HOSTILE_NAME) in s for s in summaries), summaries
    facts = b.js("return Array.from(document.querySelectorAll('.details p.kv')).map(x => x.textContent).join(' ')")
    assert visible(HOSTILE_CPU) in facts and HOSTILE_VALUE in facts
    assert visible(HOSTILE_NAME) in b.js("return document.title")
    assert_clean(b, url)
    b.screenshot("hostile.png")


def test_status_page_for_one_host(browser: Browser, tmp_path: Path) -> None:
    from bsdcrypt.hosts.replay import ReplayHost
    from bsdcrypt.pipeline import status_of

    s = status_of(ReplayHost.from_file(FIXTURES / "freebsd-12.2-bhyve-geli-software-aesni-kldloaded.yaml"))
    path = tmp_path / "status.html"
    path.write_text(html.status_page(s, "replay:freebsd-12.2-bhyve-geli-software-aesni-kldloaded"))
    b = browser
    b.console(), b.requests()
    url = b.open(path)
    b.wait(lambda d: d.execute_script("return document.querySelectorAll('.details li pre button.copy').length") > 0)
    assert b.js("return document.querySelector('details').open")
    assert_clean(b, url)
    b.screenshot("status.png")


def test_bench_comparison_page(browser: Browser, tmp_path: Path) -> None:
    from bsdcrypt.bench.records import label, load
    from bsdcrypt.render.html import BenchRun, bench_page
    from render.test_bench_html import published_pair

    runs = [BenchRun(f"{n}: {label(load(p))}", load(p), key=str(n)) for n, p in enumerate(published_pair(tmp_path), 1)]
    path = tmp_path / "compare.html"
    path.write_text(bench_page(runs, title="bsdcrypt bench comparison", command="bench --compare", source="records",
                               ratios=["run 2 vs run 1, write: 5.3x"]))
    b = browser
    b.console(), b.requests()
    url = b.open(path)
    widths = b.js("return Array.from(document.querySelectorAll('svg.chart rect')).map(r => r.getBBox().width)")
    assert len(widths) == 2 and widths[0] < widths[1]  # drawn, software shorter than accelerated
    assert_clean(b, url)
    b.screenshot("bench-compare.png")


def test_the_csp_is_in_force(browser: Browser, fleet_file: tuple[Path, fleet.FleetRun], tmp_path: Path) -> None:
    """Were escaping ever to fail, the policy still stops markup from running: a script and an inline
    handler spliced into the page raw are blocked (and said so on the console), the page's own script runs."""
    path, _ = fleet_file
    text = path.read_text().replace(
        "<main>", "<main><script>window.__pwned = 1</script><p id=\"x\" onclick=\"window.__pwned = 2\">x</p>", 1
    )
    spliced = tmp_path / "spliced.html"
    spliced.write_text(text)
    b = browser
    b.console(), b.requests()
    b.open(spliced)
    b.wait(lambda d: not d.execute_script("return document.getElementById('controls').hidden"))  # ours ran
    b.js("document.getElementById('x').click()")
    assert b.js("return window.__pwned === undefined")
    blocked = [m for m in b.console() if "Content Security Policy" in m.get("message", "")]
    assert len(blocked) >= 2, blocked


def test_print_shows_every_detail_in_light_colours(browser: Browser, fleet_file: tuple[Path, fleet.FleetRun]) -> None:
    """Printed (print media emulated, the screen's scheme dark): no controls, no copy buttons, a white
    background, the closed details' facts and every row laid out."""
    path, run = fleet_file
    b = browser
    b.open(path)
    b.wait(lambda d: not d.execute_script("return document.getElementById('controls').hidden"))
    closed = "document.querySelector('#details details:not([open]) p.kv')"
    assert b.js(f"return {closed}.checkVisibility()") is False  # on screen, closed is closed
    b.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "media": "print", "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    try:
        assert b.js(f"return {closed}.checkVisibility()") is True
        assert b.js(f"return {closed}.getBoundingClientRect().height") > 0
        assert b.js("return document.getElementById('controls').checkVisibility()") is False
        assert b.js("return Array.from(document.querySelectorAll('button.copy')).some(x => x.checkVisibility())") \
            is False
        for css in ("html", "header.top", "#hosts", "#host-table tbody tr"):
            assert b.js(f"return getComputedStyle(document.querySelector('{css}')).backgroundColor") in (
                "rgb(255, 255, 255)", "rgba(0, 0, 0, 0)"), css
        skipped = b.js("return Array.from(document.querySelectorAll('#host-table tbody, #details details'))"
                       ".filter(x => getComputedStyle(x).contentVisibility !== 'visible').length")
        assert skipped == 0
    finally:
        b.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "", "features": []})


@pytest.mark.slow
def test_values_at_the_field_caps_stay_inside_the_page(browser: Browser, tmp_path: Path) -> None:
    """A host whose name, CPU string and findings are far past the per-field cap: the page shows each
    cut at the cap with its marker, and nothing makes the page wider than the window."""
    run = fleet.FleetRun(capped_results(), 0.1, 1, 1.0)
    path = tmp_path / "caps.html"
    path.write_text(html.fleet_page(run, title="caps", source="hosts.txt", command="fleet-audit"))
    b = browser
    b.console(), b.requests()
    url = b.open(path)
    b.js("location.hash = '#d0'")
    b.wait(lambda d: d.execute_script("return document.querySelectorAll('#d0 ~ ol li pre').length") > 0)
    page = b.js("return document.body.innerText")
    assert "more characters]" in page
    width = b.js("return window.innerWidth")
    assert b.js("return document.documentElement.scrollWidth") <= width
    widest = b.js("return Math.max(...Array.from(document.querySelectorAll('#host-table tr, #details details, "
                  "#findings li')).map(x => x.getBoundingClientRect().right))")
    assert widest <= width
    assert_clean(b, url.split("#")[0])
    b.screenshot("caps.png")


def capped_results() -> list[fleet.HostResult]:
    """Two real recordings with host text made ten times the cap: a name with no break opportunity,
    a CPU model, a finding's message and remedy."""
    from render.test_html import results_from

    results = results_from([FIXTURES / "freebsd-12.2-bhyve-geli-software-aesni-kldloaded.yaml",
                            FIXTURES / "freebsd-13.0-hyperv-builtin.yaml"])[:2]
    long = html.FIELD_LIMIT * 10
    s = results[0].status
    s.host = "h" * long
    s.cpu.model = "Intel(R) " * (long // 9)
    f = s.findings[0]
    s.findings[0] = type(f)(f.id, f.severity, "m" * long, "geli attach " + "x" * long)
    entry = HostEntry(spec=f"root@{s.host}", source="hosts.txt:1", host=s.host, user="root")
    return [fleet.HostResult(entry, s, 0.01), results[1]]


def test_userland_page(browser: Browser, tmp_path: Path) -> None:
    """`bench --userland -f html` from real `openssl speed` captures: bars drawn (masked AES-GCM
    shorter than as is), no console message, no request."""
    from cli.test_bench import _openssl_output

    from bsdcrypt.bench.model import HostFacts
    from bsdcrypt.bench.openssl import userland
    from bsdcrypt.hostapi import RunResult

    class Captured:
        def run(self, command: str, timeout: float = 0) -> RunResult:
            return RunResult(0, _openssl_output(command))

    u = userland(Captured())  # type: ignore[arg-type]
    host = HostFacts(hostname=HOSTILE_NAME, release="14.1-RELEASE", arch="amd64", cpu_model=HOSTILE_CPU, ncpu=4)
    path = tmp_path / "userland.html"
    path.write_text(html.userland_page(u, host, source="local"))
    b = browser
    b.console(), b.requests()
    url = b.open(path)
    bars = b.js("return Object.fromEntries(Array.from(document.querySelectorAll('svg.chart g')).map("
                "g => [g.querySelector('text.lb').textContent, g.querySelector('rect').getBBox().width]))")
    assert 0 < bars["aes-128-gcm, AES-NI masked"] < bars["aes-128-gcm"]
    assert visible(HOSTILE_NAME) in b.js("return document.title") and b.js("return window.__pwned === undefined")
    assert_clean(b, url)
    b.screenshot("userland.png")


@pytest.mark.slow
def test_many_rows_sort_and_filter_across_bodies(browser: Browser, tmp_path: Path) -> None:
    """250 hosts: the rows are in <tbody>s of ROWS_PER_BODY; sorting orders them across the bodies,
    filtering moves the rows shown to the first bodies and hides the empty ones, clearing restores
    every row; a row scrolled to far down is laid out and painted."""
    from render.test_html import results_from

    base = results_from(sorted(FIXTURES.glob("*.yaml")))
    results = []
    for i in range(250):
        r = base[i % len(base)]
        entry = type(r.entry)(spec=f"root@h{i:03d}.example.org", source=f"hosts.txt:{i + 1}",
                              host=f"h{i:03d}.example.org", user="root")
        results.append(fleet.HostResult(entry, r.status, r.elapsed, r.error, r.error_kind))
    run = fleet.FleetRun(results, 1.0, 8, 30.0)
    path = tmp_path / "many.html"
    path.write_text(html.fleet_page(run, title="many", source="hosts.txt", command="fleet-audit"))
    b = browser
    b.console(), b.requests()
    url = b.open(path)
    b.wait(lambda d: not d.execute_script("return document.getElementById('controls').hidden"))
    per = html.ROWS_PER_BODY
    bodies = "Array.from(document.querySelectorAll('#host-table tbody'))"
    assert b.js(f"return {bodies}.map(t => t.rows.length)") == [per, per, 250 - 2 * per]
    click(b, "th[data-col='0'] button")
    b.wait(lambda d: d.execute_script("return document.querySelector(\"th[data-col='0']\").ariaSort") == "ascending")
    assert [r["hk"] for r in visible_rows(b)] == list(range(250))
    assert b.js(f"return {bodies}.map(t => t.rows.length)") == [per, per, 250 - 2 * per]
    from selenium.webdriver.common.by import By

    box = b.driver.find_element(By.ID, "filter")
    box.send_keys("opnsense")
    want = sum(1 for r in run.results if "opnsense" in " ".join(fleet_render.row(r).values()).lower())
    assert 0 < want < per
    b.wait(lambda d: len(visible_rows(b)) == want)
    shown = b.js(f"return {bodies}.map(t => [t.hidden, Array.from(t.rows).filter(r => !r.hidden).length])")
    assert shown == [[False, want], [True, 0], [True, 0]]  # packed into the first body
    assert [r["hk"] for r in visible_rows(b)] == sorted(r["hk"] for r in visible_rows(b))  # still sorted
    from selenium.webdriver.common.keys import Keys

    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    b.wait(lambda d: len(visible_rows(b)) == 250)
    assert [r["hk"] for r in visible_rows(b)] == list(range(250))
    assert b.js(f"return {bodies}.every(t => !t.hidden)")
    last = "document.querySelector('#host-table tbody:last-of-type tr:last-child')"
    b.js(f"{last}.scrollIntoView()")
    b.wait(lambda d: d.execute_script(f"return {last}.getBoundingClientRect().height") > 10)
    assert_clean(b, url)
