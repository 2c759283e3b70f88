"""`bsdcrypt status`, `record` and `recordings` as a user runs them (a real process each time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]


run = run_cli


@pytest.mark.slow
def test_status_table_on_a_shipped_recording_by_name() -> None:
    r = run("status", "--host", "replay:freebsd-12.2-bhyve-geli-software-aesni-kldloaded")
    assert r.returncode == 2, r.stderr
    assert "aesni: loaded" in r.stdout and "CRITICAL" in r.stdout and "geli-software" in r.stdout
    assert r.stderr == ""


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "load"), [("json", json.loads), ("yaml", yaml.safe_load)])
def test_status_json_and_yaml_carry_the_schema(fmt: str, load: object) -> None:
    r = run("status", "--host", "replay:freebsd-13.0-hyperv-builtin", "--format", fmt)
    assert r.returncode == 0, r.stderr
    doc = load(r.stdout)  # type: ignore[operator]
    assert doc["schema"] == 1
    assert set(doc) >= {"host", "os", "cpu", "driver", "persist", "geli", "findings", "verdict"}
    assert doc["os"]["release"] == "13.0-RELEASE-p4" and doc["driver"]["state"] == "builtin"
    assert set(doc["os"]) >= {"name", "variant", "release", "osreldate", "arch"}
    assert set(doc["cpu"]) >= {"model", "aesni", "sha", "hypervisor"}
    assert set(doc["driver"]) >= {"name", "state", "attached", "algorithms"}
    assert set(doc["persist"]) >= {"configured", "needed", "source"}


@pytest.mark.slow
def test_status_nagios_line_and_exit_code() -> None:
    r = run("status", "--host", "replay:pfsense-2.4.5-celeron-j3160-not-loaded", "--format", "nagios")
    assert r.returncode == 1
    assert r.stdout.startswith("BSDCRYPT WARNING: ") and r.stdout.count("\n") == 1 and " | " in r.stdout


@pytest.mark.slow
def test_status_on_this_linux_machine_says_so_and_exits_3() -> None:
    r = run("status")
    assert r.returncode == 3
    assert "Linux" in r.stdout and "not-freebsd" in r.stdout
    assert "Traceback" not in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["status", "--host", "replay:/nonexistent.yaml"], "no recording"),
        (["status", "--host", "replay:no-such-recording"], "no recording"),
        (["status", "--format", "xml", "--host", "replay:freebsd-13.0-hyperv-builtin"], "unknown format"),
    ],
)
def test_bad_input_is_one_line_without_traceback(args: list[str], message: str) -> None:
    r = run(*args)
    assert r.returncode in (2, 3)
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_garbage_recording_is_a_clean_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff\xfe not yaml at all: [")
    r = run("status", "--host", f"replay:{bad}")
    assert r.returncode == 3 and "Traceback" not in r.stderr and r.stderr.startswith("bsdcrypt: ")


@pytest.mark.slow
def test_record_then_replay_gives_the_same_status(tmp_path: Path) -> None:
    out = tmp_path / "me.yaml"
    r = run("record", "-o", str(out))
    assert r.returncode == 0, r.stderr
    direct = json.loads(run("status", "--format", "json").stdout)
    replayed = json.loads(run("status", "--format", "json", "--host", f"replay:{out}").stdout)
    for key in ("os", "cpu", "driver", "persist", "findings", "verdict"):
        assert replayed[key] == direct[key]


def test_record_redact_hides_the_hostname(tmp_path: Path) -> None:
    import socket

    out = tmp_path / "r.yaml"
    assert run("record", "-o", str(out), "--redact").returncode == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["redacted"] is True and doc["host"] == "host.example"
    name = socket.gethostname()
    uname = doc["steps"]["uname_a"]["out"]
    assert f" {name} " not in uname and "host.example" in uname


def test_recordings_lists_the_shipped_ones() -> None:
    r = run("recordings")
    assert r.returncode == 0
    rows = [line.split(None, 1) for line in r.stdout.splitlines()]
    names = [row[0] for row in rows]
    assert "freebsd-13.0-hyperv-builtin" in names and len(names) >= 15
    # one line per recording: its name, then what it shows (the `description:` of the recording)
    assert all(len(row) == 2 and len(row[1]) > 20 for row in rows), rows
    hyperv = dict(rows)["freebsd-13.0-hyperv-builtin"]
    assert "Hyper-V" in hyperv and "compiled into GENERIC" in hyperv


def test_status_start_up_imports_only_what_status_needs() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['bsdcrypt', 'status', '--host', 'replay:freebsd-13.0-hyperv-builtin', '-f', 'json']\n"
        "from bsdcrypt.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ['paramiko', 'bsdcrypt.bench', 'bsdcrypt.render.plan', 'bsdcrypt.enable', 'bsdcrypt.fleet', 'pydantic', 'prometheus_client']\n"
        "print(','.join(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.stderr.strip() == "", r.stderr


@pytest.mark.slow
def test_help_lists_every_command() -> None:
    r = run("--help")
    for cmd in ("status", "record", "recordings", "enable", "disable", "bench", "fleet-audit", "analyze", "probe-script"):
        assert cmd in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["status", "--nope"],
        ["status", "--timeout", "abc"],
        ["status", "-f", "bogus", "--host", "replay:freebsd-13.0-hyperv-builtin"],
        ["fleet-audit", "-j", "0", "hosts.txt"],
        ["no-such-command"],
    ],
)
def test_usage_errors_exit_3_with_one_line(args: list[str]) -> None:
    r = run(*args)
    assert r.returncode == 3  # unknown, as a monitoring plugin; click's 2 would read as CRITICAL
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("bsdcrypt: ")


def test_nagios_prints_its_line_on_stdout_even_when_the_host_cannot_be_read(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("not: a recording\n")
    r = run("status", "--host", f"replay:{bad}", "--format", "nagios")
    assert r.returncode == 3
    assert r.stdout.startswith("BSDCRYPT UNKNOWN: ") and r.stdout.count("\n") == 1


@pytest.mark.slow
def test_no_arguments_prints_help_and_exits_0() -> None:
    r = run()
    assert r.returncode == 0 and "status" in r.stdout


@pytest.mark.slow
def test_report_files_are_0644_and_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    import os
    import stat

    new = tmp_path / "new.prom"
    r = run("status", "--host", "replay:freebsd-13.0-hyperv-builtin", "-f", "prometheus", "-o", str(new))
    assert r.returncode == 0 and stat.S_IMODE(os.stat(new).st_mode) == 0o644
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("replay:freebsd-13.0-hyperv-builtin\n")
    out = tmp_path / "fleet.json"
    assert run("fleet-audit", str(hosts), "-f", "json", "-o", str(out), "--quiet").returncode == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o644
    os.chmod(out, 0o640)
    assert run("fleet-audit", str(hosts), "-f", "json", "-o", str(out), "--quiet").returncode == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640


@pytest.mark.slow
def test_a_failed_probe_replaces_the_textfile_with_an_unknown_verdict(tmp_path: Path) -> None:
    prom = tmp_path / "bsdcrypt.prom"
    assert run("status", "--host", "replay:freebsd-13.0-hyperv-builtin", "-f", "prometheus", "-o", str(prom)).returncode == 0
    assert "bsdcrypt_exit_code" in prom.read_text() and ' 0\n' in prom.read_text()
    bad = tmp_path / "gone.yaml"
    bad.write_text("not a recording\n")
    r = run("status", "--host", f"replay:{bad}", "-f", "prometheus", "-o", str(prom))
    assert r.returncode == 3
    text = prom.read_text()
    assert 'verdict="unknown"} 1' in text and 'verdict="ok"} 0' in text


@pytest.mark.parametrize("timeout", ["nan", "inf", "-5", "0"])
def test_timeouts_must_be_finite_and_positive(timeout: str) -> None:
    r = run("status", "--timeout", timeout, "--host", "replay:freebsd-13.0-hyperv-builtin", "-f", "nagios")
    assert r.returncode == 3 and "Traceback" not in r.stderr and "--timeout" in r.stderr
    assert r.stdout.startswith("BSDCRYPT UNKNOWN: ")  # a plugin's line, usage errors included


@pytest.mark.parametrize(
    "fmt", [["-f", "nagios"], ["-fnagios"], ["--format", "nagios"], ["--format=nagios"], ["-f", "json", "-fnagios"]]
)
def test_usage_errors_give_the_nagios_line_in_every_spelling_of_the_format(fmt: list[str]) -> None:
    r = run("status", *fmt, "--timeout", "abc")
    assert r.returncode == 3
    assert r.stdout.startswith("BSDCRYPT UNKNOWN: ") and "--timeout" in r.stdout and r.stdout.count("\n") == 1
    assert r.stderr.startswith("bsdcrypt: ") and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args", [["-H", "nagios"], ["--host=nagios"], ["-o", "nagios"], ["-f", "nagios", "--format", "json"]]
)
def test_nagios_as_another_value_is_not_the_nagios_format(args: list[str]) -> None:
    r = run("status", *args, "--timeout", "abc")
    assert r.returncode == 3 and r.stdout == "" and r.stderr.startswith("bsdcrypt: ")


def test_requested_format_reads_argv_like_click() -> None:
    from bsdcrypt.cli import requested_format

    assert requested_format(["bsdcrypt", "-v", "status", "-fnagios"]) == "nagios"
    assert requested_format(["bsdcrypt", "status", "--format"]) is None
    assert requested_format(["bsdcrypt", "status", "--", "-f", "nagios"]) is None
    assert requested_format(["bsdcrypt", "status", "--timeout", "-f", "-f", "yaml"]) == "yaml"


@pytest.mark.slow
def test_an_unreachable_host_gets_the_fleet_kind_as_host_finding(tmp_path: Path) -> None:
    # 127.0.0.1:1: nothing listens there; the same failure fleet-audit reports as fleet-refused
    r = run("status", "-H", "127.0.0.1:1", "-f", "prometheus", "--timeout", "10")
    assert r.returncode == 3 and r.stderr == ""
    assert 'id="host-refused",severity="unknown"} 1' in r.stdout
    r = run("status", "-H", "127.0.0.1:1", "-f", "json", "--timeout", "10")  # a document too (issue 11)
    assert r.returncode == 3 and r.stderr == ""
    assert [f["id"] for f in json.loads(r.stdout)["findings"]] == ["host-refused"]
    r = run("status", "-H", "127.0.0.1:1", "--timeout", "10")  # the table: the error, one line
    assert r.returncode == 3 and r.stdout == "" and r.stderr.startswith("bsdcrypt: connection refused")


def test_host_failure_ids_and_remedies() -> None:
    from bsdcrypt.cli import host_failure
    from bsdcrypt.errors import REMEDIES, BsdcryptError, HostError, ProbeError
    from bsdcrypt.ssh.errors import SSHError

    assert host_failure(SSHError("timeout", "x")) == ("host-timeout", REMEDIES["timeout"])
    assert host_failure(SSHError("auth", "x")) == ("host-auth", REMEDIES["auth"])
    finding, remedy = host_failure(SSHError("hostkey-unknown", "x"))
    assert finding == "host-hostkey-unknown" and "--accept-new" not in remedy.split("fleet-audit")[0]
    assert host_failure(ProbeError("x")) == ("host-garbage", REMEDIES["garbage"])
    assert host_failure(SSHError("no-such-kind", "x"))[0] == "host-error"
    assert host_failure(HostError("x"))[0] == "host-error"
    assert host_failure(BsdcryptError("no recording at x"))[0] == "host-error"
