"""Bench charts: `bench --format html`, `enable --bench --bench-html`, `bench --compare` (terminal,
JSON, HTML), the record reader's refusals and the Unicode bars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_host import ScriptedHost
from enable.test_bench import FreeBSDHost
from typer.testing import CliRunner

from bsdcrypt.bench.model import BenchParams, BenchResult, HostFacts, Measurement, Sample
from bsdcrypt.bench.records import load, result_from_record
from bsdcrypt.render.bars import bar, chart
from render.test_html import Page

MIB = 1024 * 1024
runner = CliRunner()

# The published figures of the freebsd-current thread "Enabling AESNI by default" (December 2020):
# GELI on an md device on a 10-core Xeon wrote 530 MiB/s stock and 2825 MiB/s with aesni.ko loaded.
STOCK_MIB, AESNI_MIB = 530, 2825


def published_pair(folder: Path) -> list[Path]:
    """The thread's two runs as bench records (write only, no md ceiling: the thread gives neither)."""
    paths = []
    params = BenchParams(directions=("write",), ceiling=False)
    for n, (crypto, mib, context) in enumerate((("software", STOCK_MIB, "before"),
                                                 ("accelerated software", AESNI_MIB, "after"))):
        res = BenchResult(
            HostFacts(hostname="xeon10.example", release="13.0-CURRENT", arch="amd64", driver="aesni",
                      driver_state="not-loaded" if n == 0 else "loaded"),
            params, 10, crypto=crypto, started=f"2020-12-0{n + 1}T10:00:00+00:00", context=f"enable --bench: {context}",
            measurements=[Measurement("geli", "write", [Sample(mib * MIB, mib, 10000)])],
        )
        path = folder / f"2020120{n + 1}T100000-xeon10.example.json"
        path.write_text(json.dumps(res.to_record()))
        paths.append(path)
    return paths


def _app() -> object:
    from bsdcrypt.cli import app, register_commands

    register_commands()
    return app


def test_unicode_bars_are_exact_to_an_eighth() -> None:
    assert bar(1, 1, 4) == "████"
    assert bar(1, 8, 1) == "▏"
    assert bar(0.5, 1, 3) == "█▌ "
    assert bar(0, 1, 3) == "   " and bar(5, 0, 2) == "  "
    assert bar(9, 1, 2) == "██"  # never longer than the width
    text = chart([("write", [("a", 10.0, "10"), ("b", 5.0, "5")])], width=8)
    assert text.splitlines() == ["write", "  a  ████████  10", "  b  ████      5"]


def test_record_round_trip(tmp_path: Path) -> None:
    before, after = published_pair(tmp_path)
    res = load(after)
    assert res.crypto == "accelerated software" and res.context == "enable --bench: after"
    m = res.get("geli", "write")
    assert m is not None and round(m.median_mib_s) == AESNI_MIB
    assert result_from_record(json.loads(before.read_text())).get("md", "write") is None


def test_compare_terminal_chart_is_to_scale(tmp_path: Path) -> None:
    paths = published_pair(tmp_path)
    res = runner.invoke(_app(), ["bench", "--compare", *map(str, paths)])  # type: ignore[arg-type]
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    soft = next(ln for ln in lines if "1 GELI (software)" in ln)
    fast = next(ln for ln in lines if "2 GELI (accelerated software)" in ln)
    assert fast.count("█") == 32 and soft.count("█") == 6  # 530/2825 of 32 cells
    assert "run 2 vs run 1, write: 5.3x" in res.stdout
    # a folder stands for its records, in time order
    res2 = runner.invoke(_app(), ["bench", "--compare", str(tmp_path)])  # type: ignore[arg-type]
    assert res2.stdout == res.stdout


def test_compare_json_and_html(tmp_path: Path) -> None:
    paths = published_pair(tmp_path)
    res = runner.invoke(_app(), ["bench", "--compare", *map(str, paths), "-f", "json"])  # type: ignore[arg-type]
    doc = json.loads(res.stdout)
    assert doc["kind"] == "bsdcrypt-bench-compare" and [r["file"] for r in doc["records"]] == list(map(str, paths))
    out = tmp_path / "cmp.html"
    res = runner.invoke(_app(), ["bench", "--compare", *map(str, paths), "-f", "html", "-o", str(out)])  # type: ignore[arg-type]
    assert res.exit_code == 0, res.output
    page = Page(out.read_text())
    bars = [a for t, a in page.elements if t == "rect"]
    assert [b["class"] for b in bars] == ["c-soft", "c-accel"]
    widths = [float(b["width"] or 0) for b in bars]
    assert widths[0] / widths[1] == pytest.approx(STOCK_MIB / AESNI_MIB, rel=0.01)
    assert any("5.3x" in n["text"] for n in page.find("div", "tile"))


@pytest.mark.parametrize(
    "content, says",
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"kind": "bsdcrypt-bench-userland"}', "--userland"),
        (b'{"kind": "other"}', "not a bsdcrypt bench record"),
        (b'{"kind": "bsdcrypt-bench", "results": []}', "no results"),
        (b'{"kind": "bsdcrypt-bench", "results": [{"target": "geli", "direction": "write", "samples": '
         b'[{"bw_bytes": "x", "iops": 1}]}]}', "not a number"),
        (b'{"kind": "bsdcrypt-bench", "results": [{"target": "<b>", "direction": "write"}]}', "no target"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_bad_records_are_one_line_naming_the_file(tmp_path: Path, content: bytes, says: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    res = runner.invoke(_app(), ["bench", "--compare", str(bad)])  # type: ignore[arg-type]
    assert res.exit_code == 3
    assert len(res.stderr.splitlines()) == 1 and str(bad) in res.stderr and says in res.stderr, res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit)


@pytest.mark.slow
def test_compare_refuses_devices_missing_files_and_overwriting_a_record(tmp_path: Path) -> None:
    (good, _) = published_pair(tmp_path)
    for args, says in (
        (["/dev/null"], "not a regular file"),
        ([str(tmp_path / "missing.json")], "cannot read"),
        ([str(tmp_path / "empty-dir")], "no bench records"),
        ([], "needs bench records"),
        ([str(good), "-o", str(good)], "is one of the records"),
        ([str(good), "-f", "prometheus"], "no prometheus report"),
    ):
        (tmp_path / "empty-dir").mkdir(exist_ok=True)
        res = runner.invoke(_app(), ["bench", "--compare", *args])  # type: ignore[arg-type]
        assert res.exit_code == 3 and says in res.stderr, (args, res.stderr)
    assert json.loads(good.read_text())["kind"] == "bsdcrypt-bench"  # untouched
    res = runner.invoke(_app(), ["bench", str(good)])  # type: ignore[arg-type]
    assert res.exit_code == 3 and "only bench compare (bench --compare) reads records" in res.stderr


@pytest.fixture()
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedHost:
    h = ScriptedHost()
    monkeypatch.setattr("bsdcrypt.hosts.open.parse_host_spec", lambda spec, *_: h)
    monkeypatch.setattr("bsdcrypt.bench.facts.facts_for", lambda _h: None)
    monkeypatch.setattr("bsdcrypt.bench.cleanup.RETRY_DELAY_S", 0.0)
    return h


@pytest.mark.slow
def test_bench_format_html_with_repeat_has_whiskers(scripted: ScriptedHost, tmp_path: Path) -> None:
    out = tmp_path / "bench.html"
    res = runner.invoke(_app(), ["bench", "--no-save", "--repeat", "3", "-f", "html", "-o", str(out)])  # type: ignore[arg-type]
    assert res.exit_code == 0, res.output
    page = Page(out.read_text())
    classes = [a["class"] for t, a in page.elements if t == "rect"]
    assert classes == ["c-accel", "c-ceiling", "c-accel", "c-ceiling"]  # write, read: GELI and the ceiling
    assert len([a for t, a in page.elements if t == "path" and a.get("class") == "wk"]) == 4
    cells = " ".join(n["text"] for n in page.find("td"))
    assert "(3 runs)" in cells and "accelerated software" in cells
    assert scripted.leaked() == []


def test_cleanup_refuses_html(scripted: ScriptedHost) -> None:
    """--cleanup only says what it removed: no page (bench --userland -f html: tests/cli/test_bench.py)."""
    res = runner.invoke(_app(), ["bench", "--cleanup", "-f", "html"])  # type: ignore[arg-type]
    assert res.exit_code == 3 and "no HTML report" in res.stderr
    assert scripted.commands == []  # refused before anything ran


def test_enable_bench_html_charts_before_and_after(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr("bsdcrypt.bench.cleanup.RETRY_DELAY_S", 0.0)
    h = FreeBSDHost(crypto="software")
    monkeypatch.setattr("bsdcrypt.hosts.open.parse_host_spec", lambda spec, *_: h)
    out = tmp_path / "enable.html"
    res = runner.invoke(_app(), ["enable", "--bench", "--bench-html", str(out), "--yes", "--host", "x"])  # type: ignore[arg-type]
    assert res.exit_code == 0, res.output
    assert f"bench report: {out}" in res.stdout
    page = Page(out.read_text())
    labels = [n["text"] for n in page.find("text") if "GELI" in n["text"]]
    assert any(lb.startswith("before: GELI (software)") for lb in labels), labels
    assert any(lb.startswith("after: GELI (hardware)") for lb in labels), labels
    assert any("speedup" in n["text"] for n in page.find("div", "tile"))


def test_bench_html_needs_bench_and_a_writable_place(tmp_path: Path) -> None:
    res = runner.invoke(_app(), ["enable", "--bench-html", str(tmp_path / "x.html")])  # type: ignore[arg-type]
    assert res.exit_code == 3 and "goes with --bench" in res.stderr
    res = runner.invoke(_app(), ["enable", "--bench", "--bench-html", str(tmp_path / "no" / "x.html")])  # type: ignore[arg-type]
    assert res.exit_code == 3 and "there is no folder" in res.stderr


def test_hostile_record_text_reaches_neither_terminal_nor_page_raw(tmp_path: Path) -> None:
    (path, _) = published_pair(tmp_path)
    rec = json.loads(path.read_text())
    rec["host"]["hostname"] = "evil\x1b]0;pwned\x07<script>alert(1)</script>"
    rec["crypto_mode"] = "software\x1b[2J"
    rec["context"] = "enable --bench: \u202eafter"
    path.write_text(json.dumps(rec))
    res = runner.invoke(_app(), ["bench", "--compare", str(path)])  # type: ignore[arg-type]
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "\u202e" not in res.stdout
    assert "evil\\x1b]0;pwned\\x07" in res.stdout and "software\\x1b[2J" in res.stdout
    out = tmp_path / "x.html"
    runner.invoke(_app(), ["bench", "--compare", str(path), "-f", "html", "-o", str(out)])  # type: ignore[arg-type]
    text = out.read_text()
    assert "<script>alert" not in text and "\x1b" not in text and "&lt;script&gt;alert(1)" in text
