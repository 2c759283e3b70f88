"""Helpers for the HTML report tests: a hostile recording, and headless Chromium driven by Selenium
through Debian's chromedriver (no browser download, no network: every name resolves to nothing and
any request would go to a closed loopback port).

Without chromium, chromium-driver or selenium the browser tests skip, unless BSDCRYPT_REQUIRE_CHROMIUM=1
(CI), where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "hosts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT = 60.0  # a safety net on a loaded machine; every wait ends as soon as its condition holds
SCREENSHOTS = Path(os.environ.get("BSDCRYPT_SCREENSHOT_DIR") or Path(tempfile.gettempdir()) / "bsdcrypt-html-screenshots")

# What a hostile host could put into its name, CPU string and loader.conf: markup, quotes, terminal
# escapes, a bidi override.
HOSTILE_NAME = "evil\"'<script>window.__pwned=1</script>\x1b[31mred\u202eoof"
HOSTILE_CPU = "<img src=x onerror=\"window.__pwned=2\"> 'quoted' \x1b]0;title\x07 CPU"
HOSTILE_VALUE = "NO</pre><script>window.__pwned=3</script>"
HOSTILE_COMMENT = "# \"</code><b onmouseover='window.__pwned=4'>comment</b> \x1b[2J"


def hostile_recording(folder: Path) -> Path:
    """The real 12.2 bhyve recording (loader.conf.local keeps aesni off) with hostile text put into
    its host name, CPU model and loader.conf.local (a comment and the aesni_load value). The file
    name itself carries markup and quotes."""
    src = FIXTURES / "freebsd-12.2-bhyve-not-loaded-overridden.yaml"
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    steps = data["steps"]
    steps["sysctl"]["out"] = (
        steps["sysctl"]["out"]
        .replace("kern.hostname: host.example", f"kern.hostname: {HOSTILE_NAME}")
        .replace("hw.model: Intel(R) Xeon(R) CPU E3-1225 v5 @ 3.30GHz", f"hw.model: {HOSTILE_CPU}")
    )
    steps["uname_a"]["out"] = steps["uname_a"]["out"].replace("host.example", "evil")
    steps["file:/boot/loader.conf.local"]["out"] = f'{HOSTILE_COMMENT}\naesni_load="{HOSTILE_VALUE}"\n'
    data["host"] = HOSTILE_NAME
    data["source"] = "derived in tests/htmlcheck.py from fixtures/hosts/" + src.name + " with hostile text"
    path = folder / "evil'\"<b>host.yaml"
    path.write_text(
        f"# derived from fixtures/hosts/{src.name}: hostile host name, CPU model and loader.conf.local\n"
        + yaml.safe_dump(data, allow_unicode=True, sort_keys=False),
        encoding="utf-8",
    )
    return path


def require_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install -e '.[test]')")
    if not missing:
        return
    if os.environ.get("BSDCRYPT_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"BSDCRYPT_REQUIRE_CHROMIUM=1 but {', '.join(missing)} missing (apt install chromium chromium-driver)")
    pytest.skip(f"{', '.join(missing)} not installed")


class Browser:
    """One headless Chromium, offline: page loads, console messages and every request it made."""

    def __init__(self, profile: Path) -> None:
        require_browser()
        os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not look for a driver online
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for arg in (
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
            f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--disable-default-apps",
            "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars",
        ):
            opts.add_argument(arg)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        self.driver.set_page_load_timeout(WAIT)
        self.driver.set_script_timeout(WAIT)

    def open(self, path: Path) -> str:
        """Load the file and wait until the page's script has run (the filter controls are shown)."""
        url = path.resolve().as_uri()
        self.driver.get(url)
        self.wait(lambda d: d.execute_script("return document.readyState") == "complete")
        return url

    def wait(self, condition: Any) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, WAIT, poll_frequency=0.05).until(condition)

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def console(self) -> list[dict[str, Any]]:
        return list(self.driver.get_log("browser"))

    def requests(self) -> list[str]:
        """Every URL requested since the last call, but the browser's own pages (chrome://, about:,
        and the data: images its start page loads; none touches a network). That the report itself
        has no data: URL is checked on its text (tests/render/test_html.py)."""
        urls = []
        for entry in self.driver.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg.get("method") == "Network.requestWillBeSent":
                url = msg["params"]["request"]["url"]
                if not url.startswith(("chrome://", "chrome-untrusted://", "about:", "data:")):
                    urls.append(url)
        return urls

    def screenshot(self, name: str) -> Path:
        """A full-page screenshot into the screenshot folder (outside the repository)."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.driver.set_window_size(1400, 600)  # then as tall as this page, not the last one
        height = int(self.js("return document.documentElement.scrollHeight"))
        self.driver.set_window_size(1400, max(600, min(height, 6000)))
        path = SCREENSHOTS / name
        assert self.driver.save_screenshot(str(path))
        return path

    def close(self) -> None:
        self.driver.quit()


def visible_rows(b: Browser) -> list[dict[str, Any]]:
    return list(b.js(
        "return Array.from(document.querySelectorAll('#host-table tbody tr')).filter(r => !r.hidden)"
        ".map(r => ({v: r.dataset.v, host: r.cells[0].textContent, hk: Number(r.cells[0].dataset.k),"
        " vk: ['critical', 'warning', 'unknown', 'ok'].indexOf(r.dataset.v), os: r.cells[1].textContent}))"
    ))


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
