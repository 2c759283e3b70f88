"""Issue 11 part 3: hostile host text never reaches the terminal raw, and one host cannot make a report huge.

The hostile recording is made here from the shipped real-host recording
freebsd-12.2-bhyve-not-loaded-overridden (fixtures/hosts/README.md) by editing its host name, CPU
brand string, OS release and a loader.conf.local comment to carry terminal escape sequences: the
shape of every step stays the real one.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.probe import Evidence, Step
from bsdcrypt.recording import MAX_HOST, dump, load
from bsdcrypt.status import Finding, GeliInfo, Status
from bsdcrypt.text import FIELD_LIMIT, MESSAGE_LIMIT, cut_marker, visible, visible_lines, visible_status

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "fixtures" / "hosts" / "freebsd-12.2-bhyve-not-loaded-overridden.yaml"
TITLE = "\x1b]0;owned\x07"  # set the terminal's title
RED = "\x1b[31m"
NAME = f"evil{TITLE}{RED}host\u202e"
CPU = f"Intel(R) Xeon(R) {RED}CPU\x9b2J E3-1225 v5 @ 3.30GHz"
COMMENT = f"# keep AES-NI off {TITLE}\r{RED}on this guest"
VALUE = f"NO{TITLE}"  # a value the loader does not take as YES, quoted by the finding's message


def _edit(evidence: Evidence, name: str, cpu: str, comment: str, value: str, extra: str = "") -> Evidence:
    steps = dict(evidence.steps)

    def sub(step: str, old: str, new: str) -> None:
        st_ = steps[step]
        text = st_.out.decode()
        assert old in text, (step, old)
        steps[step] = Step(st_.rc, text.replace(old, new).encode())

    sub("sysctl", "kern.hostname: host.example", f"kern.hostname: {name}")
    sub("uname_a", "host.example", name)
    sub("sysctl", "hw.model: Intel(R) Xeon(R) CPU E3-1225 v5 @ 3.30GHz", f"hw.model: {cpu}")
    sub("file:/boot/loader.conf.local", "# keep AES-NI off on this guest", comment)
    sub("file:/boot/loader.conf.local", 'aesni_load="NO"', f'aesni_load="{value}"')
    if extra:
        sub("file:/boot/loader.conf", 'aesni_load="YES"', f'aesni_load="YES" # {extra}')
    return Evidence(steps)


def _recording(
    tmp_path: Path, name: str = NAME, cpu: str = CPU, comment: str = COMMENT, value: str = VALUE, extra: str = ""
) -> Path:
    _, evidence = load(BASE)
    path = tmp_path / "hostile.yaml"
    # The recording's own `host:` field is bounded (recording.MAX_HOST: a longer one is refused, see
    # tests/test_recording_hostile.py); the host's outputs carry the long name.
    host = name[:MAX_HOST]
    path.write_text(dump(_edit(evidence, name, cpu, comment, value, extra), host), encoding="utf-8")
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, encoding="utf-8", errors="surrogateescape")


def _printable(text: str) -> bool:
    return all(line.isprintable() for line in text.split("\n"))


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    return _recording(tmp_path)


def _formats(rec: Path, write: bool = True) -> dict[str, list[str]]:
    hosts = rec.parent / "hosts.txt"
    if write:
        hosts.write_text(f"replay:{rec}\n")
    out: dict[str, list[str]] = {}
    for fmt in ("table", "nagios", "prometheus"):
        out[f"status {fmt}"] = ["status", "-H", f"replay:{rec}", "-f", fmt]
    for fmt in ("table", "csv", "prometheus"):
        out[f"fleet-audit {fmt}"] = ["fleet-audit", str(hosts), "-q", "-f", fmt]
        out[f"analyze {fmt}"] = ["analyze", str(rec), "-f", fmt]
    out["enable plan and diff"] = ["enable", "-p", "-n", "-H", f"replay:{rec}"]
    out["disable plan and diff"] = ["disable", "-p", "-n", "-H", f"replay:{rec}"]
    out["verbose status"] = ["-v", "status", "-H", f"replay:{rec}", "-f", "nagios"]
    return out


TEXT_FORMATS = sorted(_formats(Path("/x/hostile.yaml"), write=False))


@pytest.mark.parametrize("what", TEXT_FORMATS)
def test_every_text_format_shows_escapes_not_raw_controls(hostile: Path, what: str) -> None:
    r = run(*_formats(hostile)[what])
    assert r.returncode in (0, 1, 3), r.stderr
    assert "Traceback" not in r.stderr
    assert _printable(r.stdout), [line for line in r.stdout.split("\n") if not line.isprintable()][:3]
    assert _printable(r.stderr)
    if what not in ("fleet-audit table", "verbose status"):  # these show neither name nor value
        assert "\\x1b" in r.stdout + r.stderr  # shown, visibly: the admin sees something is odd


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_json_and_yaml_keep_the_exact_text(hostile: Path, fmt: str) -> None:
    r = run("status", "-H", f"replay:{hostile}", "-f", fmt)
    doc = json.loads(r.stdout) if fmt == "json" else yaml.safe_load(r.stdout)
    assert doc["host"] == NAME and doc["cpu"]["model"] == CPU
    assert "\x1b" not in r.stdout  # their own escaping is enough: no raw ESC either


def test_the_enable_json_plan_keeps_the_exact_diff(hostile: Path) -> None:
    r = run("enable", "-p", "-n", "-f", "json", "-H", f"replay:{hostile}")
    doc = json.loads(r.stdout.split("\ndry run")[0])
    diffs = "".join(a.get("diff", "") for a in doc["plan"])
    assert COMMENT.replace("\r", "") in diffs.replace("\r", "") or "aesni_load" in diffs


@pytest.mark.slow
def test_one_host_cannot_make_a_report_huge(tmp_path: Path) -> None:
    """A 400 KB host name, CPU string, loader.conf comment and value: every text report stays small (a hostile
    recording once made a 60 MB Nagios line)."""
    big = "A" * 400_000  # two of them in loader.conf.local stay under its 1 MiB limit
    rec = _recording(tmp_path, name=f"h{big}", cpu=f"C{big}", comment=f"# {big}", value=f"NO{big}", extra=big)
    for what, args in _formats(rec).items():
        r = run(*args)
        assert "Traceback" not in r.stderr, what
        longest = max(len(line) for line in (r.stdout + r.stderr).split("\n"))
        assert longest <= 4 * MESSAGE_LIMIT, (what, longest)
        assert len(r.stdout) < 64_000, (what, len(r.stdout))
        if what != "fleet-audit table":  # its cells are clipped to the column (…)
            assert "more characters]" in r.stdout + r.stderr, what
    nagios = run("status", "-H", f"replay:{rec}", "-f", "nagios").stdout
    assert nagios.count("\n") == 1 and len(nagios) < MESSAGE_LIMIT + 200


def test_bench_tables_show_escapes() -> None:
    from bsdcrypt.bench.model import (
        BenchParams,
        BenchResult,
        CipherSpeed,
        HostFacts,
        Measurement,
        Sample,
        UserlandResult,
    )
    from bsdcrypt.render.bench import render_table, render_userland

    m = Measurement("geli", "write", [Sample(100 * 1024 * 1024, 1.0, 10000)])
    facts = HostFacts(hostname=NAME, release=f"12.2{RED}", cpu_model=CPU)
    result = BenchResult(facts, BenchParams(directions=("write",), repeat=1), numjobs=1, measurements=[m],
                         fio_version=f"fio-3{TITLE}")
    for text in (render_table(result),
                 render_userland(UserlandResult(f"OpenSSL {TITLE}", [CipherSpeed("aes-128-gcm", 1e9)], None, RED))):
        assert _printable(text) and "\\x1b" in text


# ---------------------------------------------------------------------------- the sanitizer itself

hostile_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=300) | st.text(
    st.sampled_from("\x1b\x07\x00\r\n\t\x7f\x9b\u202e\u2028a ["), max_size=50
)


@settings(max_examples=300, deadline=None)
@given(text=hostile_text, limit=st.none() | st.integers(min_value=1, max_value=400))
def test_visible_is_printable_bounded_and_lossless_when_short(text: str, limit: int | None) -> None:
    shown = visible(text, limit)
    assert shown.isprintable()
    if limit is not None:
        assert len(shown) <= limit + len(cut_marker(len(text)))
    if text.isprintable() and (limit is None or len(text) <= limit):
        assert shown == text  # ordinary text is untouched
    if limit is None and "\\" not in text:  # every character is there, as itself or as its escape
        assert re.sub(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))",
                      lambda m: chr(int(m.group(1) or m.group(2) or m.group(3), 16)), shown) == text


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(hostile_text, max_size=5))
def test_visible_lines_keeps_line_feeds_only(lines: list[str]) -> None:
    block = "\n".join(lines)
    shown = visible_lines(block)
    assert _printable(shown)
    assert shown.count("\n") == block.count("\n")


def test_visible_status_bounds_every_field_and_keeps_every_finding() -> None:
    s = Status(host="h" * 10_000 + "\x1b", source="replay:x")
    s.cpu.model = f"{RED}cpu"
    s.geli = [GeliInfo(f"ada{i}.eli", "AES-XTS", 256, "software", False, True) for i in range(1000)]
    s.findings = [Finding(f"f{i}", "warning", "m" * 5000, "r\x07") for i in range(100)]
    v = visible_status(s)
    assert len(v.host) <= FIELD_LIMIT + 30 and v.cpu.model == "\\x1b[31mcpu"
    assert len(v.geli) == 64 and len(v.findings) == 100 and v.verdict == s.verdict
    assert all(len(f.message) <= MESSAGE_LIMIT + 30 and f.remedy == "r\\x07" for f in v.findings)
    assert s.host.endswith("\x1b")  # the original is not changed
