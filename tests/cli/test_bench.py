"""`bsdcrypt bench` end to end against the scripted host: render, save, exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from bench_host import Md, ScriptedHost
from typer.testing import CliRunner

from bsdcrypt.bench.model import LABEL, BenchParams
from bsdcrypt.bench.run import measure
from bsdcrypt.cli import app, register_commands

runner = CliRunner()


@pytest.fixture()
def host(monkeypatch: pytest.MonkeyPatch) -> ScriptedHost:
    h = ScriptedHost()
    monkeypatch.setattr("bsdcrypt.hosts.open.parse_host_spec", lambda spec, *_: h)
    monkeypatch.setattr("bsdcrypt.bench.facts.facts_for", lambda _h: None)
    monkeypatch.setattr("bsdcrypt.bench.cleanup.RETRY_DELAY_S", 0.0)  # where cleanup reads it
    names = {c.name or getattr(c.callback, "__name__", None) for c in app.registered_commands}
    if "bench" not in names:
        register_commands()
    return h


def test_table_output_and_record(host: ScriptedHost, tmp_path: Path) -> None:
    res = runner.invoke(app, ["bench", "--save", str(tmp_path)])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Crypto: accelerated software" in out and "(accelerated)" in out
    assert "md ceiling" in out and "MiB/s" in out and "█" in out
    assert "single run" in out
    records = list(tmp_path.glob("*.json"))
    assert len(records) == 1
    rec = json.loads(records[0].read_text())
    assert rec["kind"] == "bsdcrypt-bench" and rec["host"]["hostname"] == "bench1.example.org"
    assert host.leaked() == []


@pytest.mark.slow
def test_json_and_yaml(host: ScriptedHost) -> None:
    res = runner.invoke(app, ["bench", "--no-save", "--format", "json", "--no-read", "--no-ceiling"])
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    assert [r["direction"] for r in rec["results"]] == ["write"]
    res = runner.invoke(app, ["bench", "--no-save", "--format", "yaml", "--repeat", "2"])
    assert res.exit_code == 0, res.output
    rec = yaml.safe_load(res.stdout)
    assert rec["results"][0]["runs"] == 2


@pytest.mark.slow
def test_failing_step_exit_code_and_message(host: ScriptedHost) -> None:
    host.fail_at = next(i for i, c in enumerate(_happy()) if c.startswith("geli onetime"))
    res = runner.invoke(app, ["bench", "--no-save"])
    assert res.exit_code == 3
    assert "bench step 'geli onetime' failed" in res.stderr
    assert host.leaked() == []


@pytest.mark.slow
def test_interrupt_exit_130(host: ScriptedHost) -> None:
    host.interrupt_at = next(i for i, c in enumerate(_happy()) if c.startswith("exec fio"))
    res = runner.invoke(app, ["bench", "--no-save"])
    assert res.exit_code == 130
    assert "interrupted" in res.stderr and "during step 'fio write on md1.eli'" in res.stderr
    assert host.leaked() == []


def test_cleanup_option(host: ScriptedHost) -> None:
    host.md["md1"] = Md("swap", "1024m", LABEL)
    res = runner.invoke(app, ["bench", "--cleanup"])
    assert res.exit_code == 0, res.output
    assert "cleanup removed md1" in res.stdout
    assert host.leaked() == []


def _happy() -> list[str]:
    h = ScriptedHost()
    measure(h, BenchParams())
    return h.commands


OPENSSL = Path(__file__).resolve().parents[2] / "fixtures" / "openssl"


def _openssl_output(command: str) -> bytes:
    """Real `openssl speed` captures (Debian, OpenSSL 3.0.19) for the cipher the command asks for."""
    if "chacha20" in command:
        name = "debian-openssl3.0.19-evp-chacha20poly1305.txt"
    elif "OPENSSL_ia32cap='~" in command:
        name = "debian-openssl3.0.19-evp-aes128gcm-ia32cap-masked.txt"
    else:
        name = "debian-openssl3.0.19-evp-aes128gcm-aesni.txt"
    return (OPENSSL / name).read_bytes().split(b"# ---\n", 1)[1]


def test_userland_alone_needs_no_root_no_fio_and_touches_no_device(
    host: ScriptedHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bsdcrypt.hostapi import RunResult

    host.uid = 1001
    host.has_fio = False
    scripted = host._execute

    def execute(kind: str, command: str) -> RunResult:
        return RunResult(0, _openssl_output(command)) if kind == "openssl" else scripted(kind, command)

    monkeypatch.setattr(host, "_execute", execute)
    res = runner.invoke(app, ["bench", "--userland", "--save", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "chacha20-poly1305" in res.stdout and "AES-NI masked" in res.stdout
    assert host.commands and all(ScriptedHost.kind(c) == "openssl" for c in host.commands)
    assert host.created == []
    # the userland figures are saved as a record of their own kind (no GELI/md/fio fields)
    records = list(tmp_path.glob("*.json"))
    assert [p.name.endswith("-scripted-userland.json") for p in records] == [True]
    rec = json.loads(records[0].read_text())
    assert rec["kind"] == "bsdcrypt-bench-userland" and rec["schema"] == 1
    assert rec["prefer"] in ("AES-GCM", "ChaCha20-Poly1305") and rec["advice"]
    assert {c["cipher"] for c in rec["ciphers"]} == {"aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"}
    assert rec["host"]["hostname"] == "scripted" and rec["started"] and rec["finished"]
    assert f"saved: {records[0]}" in res.stdout
    res = runner.invoke(app, ["bench", "--userland", "--format", "json", "--save", str(tmp_path)])
    assert res.exit_code == 0 and json.loads(res.stdout)["prefer"] in ("AES-GCM", "ChaCha20-Poly1305")
    assert len(list(tmp_path.glob("*.json"))) == 2
    res = runner.invoke(app, ["bench", "--userland", "--no-save", "--save", str(tmp_path)])
    assert res.exit_code == 0 and len(list(tmp_path.glob("*.json"))) == 2 and "saved:" not in res.stdout


def test_prometheus_textfile(host: ScriptedHost, tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families
    from render.test_prometheus import strict_check

    out = tmp_path / "bsdcrypt_bench.prom"
    res = runner.invoke(app, ["bench", "--no-save", "--format", "prometheus", "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    families = strict_check(text)
    assert set(families) == {
        "bsdcrypt_bench_throughput_bytes_per_second",
        "bsdcrypt_bench_iops",
        "bsdcrypt_bench_accelerated",
        "bsdcrypt_bench_ceiling_ratio",
        "bsdcrypt_bench_last_run_timestamp_seconds",
    }
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    bw = {(s.labels["target"], s.labels["direction"]): s for s in parsed["bsdcrypt_bench_throughput_bytes_per_second"].samples}
    assert set(bw) == {("geli", "write"), ("geli", "read"), ("md", "write"), ("md", "read")}
    geli_w = bw[("geli", "write")]
    assert geli_w.labels["crypto"] == "accelerated software" and geli_w.labels["host"] == "bench1.example.org"
    assert geli_w.labels["algorithm"] == "AES-XTS" and geli_w.labels["key_length"] == "128"
    # the scripted fio reports bw_bytes; the metric carries them unchanged (base unit, not MiB)
    rec = json.loads(runner.invoke(app, ["bench", "--no-save", "--format", "json"]).stdout)
    want = {(r["target"], r["direction"]): r["median_bytes_per_s"] for r in rec["results"]}
    assert {k: s.value for k, s in bw.items()} == want
    assert [s.value for s in parsed["bsdcrypt_bench_accelerated"].samples] == [1.0]
    ratios = {s.labels["direction"]: s.value for s in parsed["bsdcrypt_bench_ceiling_ratio"].samples}
    assert ratios == rec["ceiling_fraction"]
    assert host.leaked() == []


def test_prometheus_refused_for_userland(host: ScriptedHost) -> None:
    res = runner.invoke(app, ["bench", "--userland", "--format", "prometheus"])
    assert res.exit_code == 3
    assert "bench userland (--userland) has no Prometheus metrics" in res.stderr
    assert host.commands == []  # refused before anything ran


def test_keylen_256_end_to_end(host: ScriptedHost) -> None:
    res = runner.invoke(app, ["bench", "--no-save", "--keylen", "256", "--no-ceiling", "--no-read"])
    assert res.exit_code == 0, res.output
    assert "geli onetime -e AES-XTS -l 256 -s 4096 md1" in host.commands
    assert "GELI: AES-XTS 256, sector 4096" in res.stdout


def test_spread_is_the_same_figure_in_table_and_json() -> None:
    from bsdcrypt.bench.model import BenchResult, HostFacts, Measurement, Sample
    from bsdcrypt.render.bench import render_table

    mib = 1024 * 1024
    m = Measurement("geli", "write", [Sample(b * mib, 1.0, 10000) for b in (100, 110, 90)])
    result = BenchResult(HostFacts(), BenchParams(directions=("write",), repeat=3), numjobs=1, measurements=[m])
    assert result.to_record()["results"][0]["spread_pct"] == 20.0  # (110 - 90) / 100
    table = render_table(result)
    assert "20.0% (3 runs)" in table and "(max-min)/median" in table and "±" not in table


def test_cleanup_refuses_the_devices_of_a_running_bench(host: ScriptedHost) -> None:

    from bsdcrypt.bench.state import controller_name

    host.md["md1"] = Md("swap", "1024m", LABEL)
    host.state_file = f"1732000000 md1 {os.getppid()}@{controller_name()} swap 1073741824\n"
    res = runner.invoke(app, ["bench", "--cleanup"])
    assert res.exit_code == 3
    assert "left alone: md1: md1 belongs to a bsdcrypt bench that is still running" in res.stderr
    assert "md1" in host.md


def test_sigterm_during_cleanup_after_an_error_exits_130(host: ScriptedHost, monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    from bsdcrypt.hostapi import RunResult

    scripted = host._execute

    def execute(kind: str, command: str) -> RunResult:
        if kind == "mdconfig-detach":
            os.kill(os.getpid(), signal.SIGTERM)  # deferred until cleanup is done
        return scripted(kind, command)

    monkeypatch.setattr(host, "_execute", execute)
    host.fail_at = next(i for i, c in enumerate(_happy()) if c.startswith("geli onetime"))
    res = runner.invoke(app, ["bench", "--no-save"])
    assert res.exit_code == 130, res.output
    assert "bench interrupted (SIGTERM) while cleaning up after step 'geli onetime' failed" in res.stderr
    assert "cleanup removed md1" in res.stderr
    assert host.leaked() == []


@pytest.mark.slow
@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1"}])
def test_host_help_names_user_and_ssh(env: dict[str, str]) -> None:
    """`[user@]` shows with rich help and with plain click help (NO_COLOR), never as `\\[user@]`."""
    from conftest import run_cli

    for job in ("geli", "userland", "cleanup"):
        res = run_cli("bench", job, "--help", env={"COLUMNS": "200", **env})
        assert res.returncode == 0, res.stderr
        text = " ".join(res.stdout.replace("│", " ").split())
        assert "local (default), or [user@]host[:port] over SSH (a recording cannot run a bench)" in text
        assert "\\[" not in text


@pytest.mark.parametrize("where", ["nodir/report.json", "isdir"])
def test_output_is_checked_before_the_bench_runs(host: ScriptedHost, tmp_path: Path, where: str) -> None:
    (tmp_path / "isdir").mkdir()
    out = tmp_path / where
    for extra in ([], ["--cleanup"], ["--userland"]):
        res = runner.invoke(app, ["bench", "--no-save", "-f", "json", "-o", str(out), *extra])
        assert res.exit_code == 3, res.output
        assert res.stderr.startswith(f"bsdcrypt: cannot write the report to {out}: ") and res.stderr.count("\n") == 1
    assert host.commands == []  # nothing ran: no fio run wasted


def test_cleanup_json_and_yaml_say_what_was_removed_and_left_alone(host: ScriptedHost, tmp_path: Path) -> None:

    from bsdcrypt.bench.state import controller_name

    host.md["md1"] = Md("swap", "1024m", LABEL)
    host.md["md2"] = Md("swap", "1024m", LABEL)
    host.state_file = f"1732000000 md2 {os.getppid()}@{controller_name()} swap 1073741824\n"
    res = runner.invoke(app, ["bench", "--cleanup", "-f", "json"])
    assert res.exit_code == 3, res.output  # something was left alone
    doc = json.loads(res.stdout)
    assert doc["kind"] == "bsdcrypt-bench-cleanup" and doc["ok"] is False
    assert doc["removed"] == ["md1"] and doc["failed"] == []
    assert [d["device"] for d in doc["left_alone"]] == ["md2"] and "still running" in doc["left_alone"][0]["why"]
    out = tmp_path / "cleanup.yaml"
    res = runner.invoke(app, ["bench", "--cleanup", "-f", "yaml", "-o", str(out)])
    assert res.exit_code == 3 and res.stdout == ""
    assert yaml.safe_load(out.read_text())["removed"] == []
    text = tmp_path / "cleanup.txt"
    host.state_file = None
    res = runner.invoke(app, ["bench", "--cleanup", "-o", str(text)])
    assert res.exit_code == 0, res.output
    assert text.read_text() == "cleanup removed md2\n" and res.stdout == ""


def test_cleanup_has_no_prometheus_metrics(host: ScriptedHost) -> None:
    res = runner.invoke(app, ["bench", "--cleanup", "-f", "prometheus"])
    assert res.exit_code == 3 and "bench cleanup (--cleanup) has no Prometheus metrics" in res.stderr
    assert host.commands == []


def test_bench_o_to_a_fifo_writes_in_place(host: ScriptedHost, tmp_path: Path) -> None:
    """Issue 11: bench -o uses the one output mechanism: a FIFO (like /dev/null) is written, not replaced."""
    import stat
    import threading

    fifo = tmp_path / "bench.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    res = runner.invoke(app, ["bench", "--no-save", "--format", "prometheus", "-o", str(fifo)])
    reader.join(timeout=60)
    assert res.exit_code == 0, res.output
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and b"bsdcrypt_bench_iops" in got[0]


@pytest.mark.slow
def test_userland_html_charts_each_cipher_as_is_and_masked(
    host: ScriptedHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench --userland -f html`: one page with a bar per cipher as OpenSSL runs it and with AES-NI
    masked, the ratio, the advice; `--cleanup -f html` is refused in one line."""
    from render.test_html import Page

    from bsdcrypt.hostapi import RunResult

    scripted = host._execute

    def execute(kind: str, command: str) -> RunResult:
        return RunResult(0, _openssl_output(command)) if kind == "openssl" else scripted(kind, command)

    monkeypatch.setattr(host, "_execute", execute)
    out = tmp_path / "userland.html"
    res = runner.invoke(app, ["bench", "--userland", "-f", "html", "-o", str(out), "--save", str(tmp_path)])
    assert res.exit_code == 0, res.output
    record = json.loads(next(tmp_path.glob("*-userland.json")).read_text())
    text = out.read_text()
    page = Page(text)
    labels = [n["text"] for n in page.find("text", "lb")]
    tds = [n["text"] for n in page.find("td")]
    rows = {tds[i]: tds[i:i + 4] for i in range(0, len(tds), 4)}  # cipher, MiB/s, masked, ratio
    assert set(rows) == {c["cipher"] for c in record["ciphers"]}
    for c in record["ciphers"]:  # a bar for each figure there is; a cipher without one is a "-" row
        assert (c["cipher"] in labels) == (c["bytes_per_s"] is not None)
        assert (f"{c['cipher']}, AES-NI masked" in labels) == (c["masked_bytes_per_s"] is not None)
        if c["bytes_per_s"] is None:
            assert rows[c["cipher"]][1:] == ["-", "-", "-"]
    gcm = next(c for c in record["ciphers"] if c["cipher"] == "aes-128-gcm")
    assert gcm["masked_bytes_per_s"]
    assert rows["aes-128-gcm"][3] == f"{gcm['bytes_per_s'] / gcm['masked_bytes_per_s']:.1f}x"
    assert record["prefer"] in text and "bench --userland" in text
    assert page.find("script") and "unsafe" not in text
    res = runner.invoke(app, ["bench", "--cleanup", "-f", "html", "-o", str(tmp_path / "c.html")])
    assert res.exit_code == 3 and res.stderr.count("\n") == 1 and "bench cleanup (--cleanup) has no HTML report" in res.stderr
    assert not (tmp_path / "c.html").exists()
