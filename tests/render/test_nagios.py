"""`--format nagios` against the monitoring-plugins development guidelines:

* one line of output: `SERVICE STATUS: information text | perfdata`;
* STATUS is OK, WARNING, CRITICAL or UNKNOWN and matches the exit code 0, 1, 2, 3;
* the text holds no `|` (it starts the performance data);
* perfdata is space-separated `'label'=value[UOM];[warn];[crit];[min];[max]`: a label quoted with
  single quotes when it has spaces, `=` or `'`; value `[-0-9.]` or `U`; UOM one of none, s, ms, us, %,
  B, KB, MB, TB, c; warn/crit in range format `[@][start:][end]`; min/max numbers; trailing empty
  fields may be dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.pipeline import status_of
from bsdcrypt.render.status import nagios
from bsdcrypt.status import Finding, GeliInfo, Status

ROOT = Path(__file__).resolve().parents[2]
HOSTS = sorted((ROOT / "fixtures" / "hosts").glob("*.yaml"))
STATES = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}

LABEL = r"(?:'(?:[^'=]|'')+'|[^'=\s]+)"
NUM = r"-?[0-9]+(?:\.[0-9]+)?"
UOM = r"(?:s|ms|us|%|B|KB|MB|TB|c)?"
RANGE = rf"(?:@?(?:(?:{NUM}|~):)?(?:{NUM})?)"
PERF = re.compile(rf"^{LABEL}=(?:{NUM}|U){UOM}(?:;{RANGE}(?:;{RANGE}(?:;(?:{NUM})?(?:;(?:{NUM})?)?)?)?)?$")
LINE = re.compile(r"^(\S+) (OK|WARNING|CRITICAL|UNKNOWN): ([^|\n]+?)(?: \| (.*))?$")


def check_plugin_output(out: str, exit_code: int) -> dict[str, str]:
    """Assert the guidelines; return label -> value of the perfdata."""
    assert out.endswith("\n") and out.count("\n") == 1, f"not one line: {out!r}"
    m = LINE.match(out[:-1])
    assert m, f"not 'SERVICE STATUS: text | perfdata': {out!r}"
    service, state, text, perf = m.groups()
    assert STATES[state] == exit_code
    assert text.strip() == text and text
    values: dict[str, str] = {}
    for item in (perf or "").split(" "):
        assert PERF.match(item), f"bad perfdata {item!r}"
        label, rest = item.rsplit("=", 1)
        values[label.strip("'")] = rest.split(";")[0]
    return values


@pytest.mark.parametrize("path", HOSTS, ids=[p.stem for p in HOSTS])
def test_every_recording_gives_a_guideline_line(path: Path) -> None:
    s = status_of(ReplayHost.from_file(path))
    perf = check_plugin_output(nagios(s), s.exit_code)
    assert set(perf) == {"aes_active", "persisted", "geli_software"}
    if s.os.name in ("FreeBSD", "MidnightBSD"):
        assert perf["geli_software"] == str(sum(g.accelerated is False for g in s.geli))
    else:
        assert perf["geli_software"] == "U"
    if s.driver.attached is not None:
        assert perf["aes_active"] == ("1" if s.driver.attached and s.driver.accelerates_aes else "0")
    else:
        assert perf["aes_active"] == "U"
    assert perf["persisted"] == {True: "1", False: "0", None: "U"}[s.persist.configured]
    assert perf == _prometheus_values(s), "nagios and prometheus disagree"


PROM_OF = {"aes_active": "bsdcrypt_aesni_active", "persisted": "bsdcrypt_persisted",
           "geli_software": "bsdcrypt_geli_software_providers"}


def _prometheus_values(s: Status) -> dict[str, str]:
    """What `--format prometheus` says for the three perfdata values: the number, or U if left out."""
    from bsdcrypt.render.prometheus import render

    values = {}
    for label, metric in PROM_OF.items():
        lines = [line for line in render([s]).splitlines() if line.startswith(metric + "{")]
        assert len(lines) <= 1
        values[label] = lines[0].rsplit(" ", 1)[1] if lines else "U"
    return values


@pytest.mark.slow
@pytest.mark.parametrize(
    ("host", "expected"),
    [
        # nothing could be read: every value is undetermined, none is a measured 0
        ("127.0.0.1:1", {"aes_active": "U", "persisted": "U", "geli_software": "U"}),
        # a Linux host: no FreeBSD driver, no loader.conf, no GELI
        ("replay:linux-debian12-local", {"aes_active": "U", "persisted": "U", "geli_software": "U"}),
        # pfSense loads aesni from its own setting, which the probe cannot read: with the module loaded and no
        # loader.conf line, persisted by that setting (inferred, issue 27)
        ("replay:pfsense-2.4.5-i5-4590s-loaded", {"aes_active": "1", "persisted": "1", "geli_software": "0"}),
        # determined values stay 0: not loaded, not persisted (commented-out aesni_load), no GELI
        ("replay:freebsd-11.0-current-custom-kernel-x-no-aesni", {"aes_active": "0", "persisted": "0", "geli_software": "0"}),
        ("replay:freebsd-13.0-hyperv-builtin", {"aes_active": "1", "persisted": "1", "geli_software": "0"}),
    ],
)
def test_undetermined_values_are_U_not_0(host: str, expected: dict[str, str]) -> None:
    r = run_cli("status", "--host", host, "--format", "nagios", "--timeout", "10")
    assert r.stderr == ""
    assert check_plugin_output(r.stdout, r.returncode) == expected
    # min and max stay with U: 'label'=value[UOM];[warn];[crit];[min];[max]
    want = " ".join(f"{k}={v};;;0" + ("" if k == "geli_software" else ";1") for k, v in expected.items())
    assert r.stdout.rstrip("\n").split(" | ")[1] == want


@pytest.mark.slow
@pytest.mark.parametrize("path", HOSTS[:6], ids=[p.stem for p in HOSTS[:6]])
def test_cli_exit_code_matches_the_status_word(path: Path) -> None:
    r = run_cli("status", "--host", f"replay:{path}", "--format", "nagios")
    assert r.stderr == ""
    check_plugin_output(r.stdout, r.returncode)


severity = st.sampled_from(["info", "warning", "critical", "unknown"])


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(st.tuples(st.text(max_size=60), severity), max_size=4),
    attached=st.sampled_from([True, False, None]),
    configured=st.sampled_from([True, False, None]),
    geli=st.lists(st.sampled_from([True, False, None]), max_size=3),
)
def test_any_status_gives_a_guideline_line(
    messages: list[tuple[str, str]], attached: bool | None, configured: bool | None, geli: list[bool | None]
) -> None:
    s = Status(host="h", source="local")
    s.driver.attached, s.driver.accelerates_aes, s.persist.configured = attached, attached, configured
    s.geli = [GeliInfo(f"da{i}.eli", "AES-XTS", 256, "x", g, False) for i, g in enumerate(geli)]
    s.findings = [Finding(f"f{i}", sev, msg, "r") for i, (msg, sev) in enumerate(messages)]  # type: ignore[arg-type]
    s.os.name = "FreeBSD"
    perf = check_plugin_output(nagios(s), s.exit_code)
    assert perf["aes_active"] == {True: "1", False: "0", None: "U"}[attached]
    assert perf["persisted"] == {True: "1", False: "0", None: "U"}[configured]
    assert perf["geli_software"] == str(geli.count(False))
    assert perf == _prometheus_values(s)
