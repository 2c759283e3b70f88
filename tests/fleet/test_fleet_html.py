"""fleet-audit --format html against the loopback sshd fleet, opened in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from htmlcheck import Browser, png_size, require_browser, visible_rows

from .conftest import TIMEOUT, FleetEnv
from .test_fleet_sshd import bsdcrypt


@pytest.mark.slow
def test_loopback_fleet_report_in_a_browser(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    require_browser()
    env = loopback_fleet
    specs = [env.spec(a) for a in list(env.healthy)[:8]]
    specs += [env.spec(a) for a, kind in env.faulty.items() if kind in ("auth-refused", "garbage")]
    specs += [env.spec(env.fleet.closed_addr), env.spec(env.linux)]
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("\n".join(specs) + "\n")
    out = tmp_path / "fleet.html"
    base = ["fleet-audit", str(hosts), "-F", str(env.fleet.ssh_config), "--timeout", str(TIMEOUT), "-q"]
    proc = bsdcrypt(*base, "--format", "html", "-o", str(out))
    assert proc.returncode in (2, 3), proc.stderr
    assert proc.stderr == ""
    reference = json.loads(bsdcrypt(*base, "--format", "json").stdout)
    failed = {h["fleet"]["target"]: h["fleet"]["error_kind"] for h in reference["hosts"] if h["fleet"]["error"]}
    assert len(failed) >= 3

    b = Browser(tmp_path / "profile")
    try:
        b.console(), b.requests()
        url = b.open(out)
        b.wait(lambda d: not d.execute_script("return document.getElementById('controls').hidden"))
        rows = visible_rows(b)
        assert sorted(r["host"] for r in rows) == sorted(specs)
        assert [r["vk"] for r in rows] == sorted(r["vk"] for r in rows)
        texts = b.js("return Array.from(document.querySelectorAll('#host-table tbody tr')).map(r => r.textContent)")
        for target, kind in failed.items():
            assert any(target in t and f"{kind}:" in t for t in texts), (target, kind)
        messages = [m for m in b.console() if m.get("level") in ("SEVERE", "WARNING")]
        assert messages == []
        assert set(b.requests()) <= {url}
        width, height = png_size(b.screenshot("loopback-fleet.png"))
        assert width >= 1000 and height > 600
    finally:
        b.close()
