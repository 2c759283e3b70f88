"""`--format prometheus`: checked with prometheus_client's real text parser and a strict line grammar
of the text exposition format 0.0.4, on every shipped recording, one at a time and as a fleet."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.pipeline import status_of
from bsdcrypt.render import prometheus
from bsdcrypt.status import Finding, GeliInfo, Status
from bsdcrypt.text import visible

parser = pytest.importorskip("prometheus_client.parser")

ROOT = Path(__file__).resolve().parents[2]
HOSTS = sorted((ROOT / "fixtures" / "hosts").glob("*.yaml"))
CLI = [sys.executable, "-c", "from bsdcrypt.cli import main; main()"]

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{{LABEL}(?:,{LABEL})*\}})? (-?[0-9.]+(?:e[+-]?[0-9]+)?|NaN|[+-]Inf)$")
HELP = re.compile(rf"^# HELP ({NAME}) ((?:[^\\\n]|\\[\\n])*)$")
TYPE = re.compile(rf"^# TYPE ({NAME}) (counter|gauge|histogram|summary|untyped)$")


def _status(path: Path) -> Status:
    return status_of(ReplayHost.from_file(path))


def strict_check(text: str) -> dict[str, list[str]]:
    """The exposition grammar, stricter than the parser: HELP then TYPE then the family's samples,
    each family exactly once and contiguous, no timestamps, a final newline. Returns name -> samples."""
    assert text.endswith("\n")
    families: dict[str, list[str]] = {}
    current: str | None = None
    expect_type: str | None = None
    for line in text[:-1].split("\n"):
        if m := HELP.match(line):
            assert expect_type is None, line
            assert m.group(1) not in families, f"family {m.group(1)} appears twice"
            current = expect_type = m.group(1)
            families[current] = []
        elif m := TYPE.match(line):
            assert m.group(1) == expect_type, line
            expect_type = None
        elif m := SAMPLE.match(line):
            assert expect_type is None and m.group(1) == current, f"sample outside its family: {line}"
            families[current].append(line)
        else:
            raise AssertionError(f"not exposition format: {line!r}")
    assert all(families.values()), "a family without samples"
    return families


def parsed(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in parser.text_string_to_metric_families(text):
        assert fam.name not in out, f"family {fam.name} split"
        assert fam.type == "gauge" and fam.documentation
        out[fam.name] = [(dict(s.labels), s.value) for s in fam.samples]
    return out


def _value(fams: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float | None:
    hits = [v for lab, v in fams.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
    assert len(hits) <= 1
    return hits[0] if hits else None


@pytest.mark.parametrize("path", HOSTS, ids=[p.stem for p in HOSTS])
def test_each_recording_parses_and_matches_its_status(path: Path) -> None:
    s = _status(path)
    text = prometheus.render([s], timestamp=1_700_000_000)
    strict_check(text)
    fams = parsed(text)
    for name, samples in fams.items():
        for labels, _ in samples:
            if name == "bsdcrypt_last_run_timestamp_seconds":
                assert labels == {}
                continue
            assert labels["host"] == s.host and labels["source"] == s.source
    d = s.driver
    active = _value(fams, "bsdcrypt_aesni_active")
    if d.attached is None:
        assert active is None
    else:
        assert active == (1.0 if d.attached and d.accelerates_aes else 0.0)
    assert _value(fams, "bsdcrypt_persisted") == (
        None if s.persist.configured is None else float(s.persist.configured)
    )
    if s.os.name == "FreeBSD":
        assert _value(fams, "bsdcrypt_geli_software_providers") == sum(g.accelerated is False for g in s.geli)
        assert _value(fams, "bsdcrypt_geli_providers") == len(s.geli)
    assert _value(fams, "bsdcrypt_exit_code") == s.exit_code
    verdicts = {lab["verdict"]: v for lab, v in fams["bsdcrypt_verdict"]}
    assert verdicts == {v: float(v == s.verdict) for v in ("ok", "warning", "critical", "unknown")}
    states = fams["bsdcrypt_driver_state"]
    assert all(v == 1.0 for _, v in states)
    assert {(lab["driver"], lab["state"]) for lab, _ in states} == {
        (x.name, x.state) for x in (d, *s.other_drivers)
    }
    assert {lab["id"] for lab, _ in fams.get("bsdcrypt_finding", [])} == {f.id for f in s.findings}
    assert _value(fams, "bsdcrypt_last_run_timestamp_seconds") == 1_700_000_000


def test_a_fleet_is_one_document_with_each_family_once() -> None:
    statuses = [_status(p) for p in HOSTS] * 2  # duplicates must not produce duplicate series
    text = prometheus.render(statuses)
    families = strict_check(text)
    fams = parsed(text)
    for name, samples in fams.items():
        keys = [tuple(sorted(lab.items())) for lab, _ in samples]
        assert len(keys) == len(set(keys)), f"duplicate series in {name}"
        assert len(samples) == len(families[name])
    assert len(fams["bsdcrypt_exit_code"]) == len(HOSTS)
    worst = max(s.exit_code for s in statuses)
    assert max(v for _, v in fams["bsdcrypt_exit_code"]) == worst


def test_unknowns_are_left_out_not_zero() -> None:
    s = Status(host="h", source="local")
    fams = parsed(prometheus.render([s]))
    assert "bsdcrypt_persisted" not in fams and "bsdcrypt_aesni_active" not in fams
    assert "bsdcrypt_geli_software_providers" not in fams  # not a FreeBSD host: no GELI count
    assert _value(fams, "bsdcrypt_exit_code") == 0


def test_empty_input_is_an_empty_file() -> None:
    assert prometheus.render([]) == ""


hostile = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(host=hostile, source=hostile, geli=hostile, finding=hostile)
def test_label_values_round_trip_through_the_parser(host: str, source: str, geli: str, finding: str) -> None:
    s = Status(host=host, source=source)
    s.os.name, s.os.release, s.os.product = "FreeBSD", "14.1-RELEASE", geli
    s.geli.append(GeliInfo(geli, "AES-XTS", 256, "software", False, True))
    s.findings.append(Finding(finding, "warning", "m\n|x", "r"))
    text = prometheus.render([s])
    strict_check(text)
    fams = parsed(text)
    # Label values are host text: they arrive as bsdcrypt.text shows them (controls escaped)
    host, source, geli, finding = (visible(x) for x in (host, source, geli, finding))
    assert all(line.isprintable() for line in text.split("\n"))
    assert _value(fams, "bsdcrypt_exit_code", host=host, source=source) == 1
    assert _value(fams, "bsdcrypt_info", host=host, product=geli) == 1
    assert _value(fams, "bsdcrypt_finding", host=host, id=finding) == 1
    assert _value(fams, "bsdcrypt_geli_needs_reattach_providers", host=host) == 1


def test_escaping_by_the_book() -> None:
    assert prometheus.escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    assert prometheus.escape_help('a\\b"c\nd') == 'a\\\\b"c\\nd'
    assert prometheus.format_value(1.0) == "1" and prometheus.format_value(0.5) == "0.5"
    assert prometheus.format_value(float("nan")) == "NaN"


# ---------------------------------------------------------------------------- the CLI


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def test_status_writes_the_textfile_atomically(tmp_path: Path) -> None:
    target = tmp_path / "bsdcrypt.prom"
    target.write_text("old\n")
    before = target.stat().st_ino
    name = "freebsd-12.2-bhyve-geli-software-aesni-kldloaded"
    r = _run("status", "--host", f"replay:{name}", "--format", "prometheus", "-o", str(target))
    assert r.returncode == 2, r.stderr  # critical: GELI on software
    assert r.stdout == ""
    assert target.stat().st_ino != before  # replaced by a rename, never rewritten in place
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # node_exporter runs as another user
    assert os.listdir(tmp_path) == ["bsdcrypt.prom"]  # no temp file left behind
    fams = parsed(target.read_text())
    assert _value(fams, "bsdcrypt_geli_software_providers") == 1
    assert _value(fams, "bsdcrypt_exit_code") == 2


def test_status_to_a_missing_directory_is_one_line_exit_3(tmp_path: Path) -> None:
    r = _run("status", "--host", "replay:freebsd-13.0-hyperv-builtin", "-f", "prometheus",
             "-o", str(tmp_path / "nope" / "bsdcrypt.prom"))
    assert r.returncode == 3
    assert r.stderr.startswith("bsdcrypt: cannot write") and r.stderr.count("\n") == 1
    assert not (tmp_path / "nope").exists()


def test_status_stdout_and_other_formats_with_output(tmp_path: Path) -> None:
    r = _run("status", "--host", "replay:freebsd-13.0-hyperv-builtin", "-f", "prometheus")
    assert r.returncode == 0
    assert _value(parsed(r.stdout), "bsdcrypt_aesni_active", driver="aesni") == 1
    out = tmp_path / "s.json"
    r = _run("status", "--host", "replay:freebsd-13.0-hyperv-builtin", "-f", "json", "-o", str(out))
    assert r.returncode == 0 and '"verdict": "ok"' in out.read_text()


def test_prometheus_stays_off_the_status_start_up_path() -> None:
    code = (
        "import sys, atexit\n"
        "atexit.register(lambda: print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('prometheus_client', 'ansible') or m == 'bsdcrypt.render.prometheus'), file=sys.stderr))\n"
        "from bsdcrypt.cli import main\n"
        "sys.argv = ['bsdcrypt', 'status', '--host', 'replay:freebsd-13.0-hyperv-builtin']\n"
        "main()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0
    assert r.stderr.strip().splitlines()[-1] == "[]"


def test_fleet_audit_prometheus_has_a_series_per_host(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("".join(f"replay:{p}\n" for p in HOSTS))
    out = tmp_path / "bsdcrypt.prom"
    r = _run("fleet-audit", "-q", "-f", "prometheus", "-o", str(out), str(hosts))
    from bsdcrypt.status import EXIT_CODES, worst_verdict

    # the worst host wins, critical before unknown (the Linux recording is unknown)
    assert r.returncode == EXIT_CODES[worst_verdict([_status(p).verdict for p in HOSTS])] == 2, r.stderr
    strict_check(out.read_text())
    fams = parsed(out.read_text())
    assert {lab["source"] for lab, _ in fams["bsdcrypt_exit_code"]} == {f"replay:{p}" for p in HOSTS}
