"""`bsdcrypt probe-script` and `bsdcrypt analyze` without an engine: raw outputs (also via a pty),
tokens, cut-off and garbage inputs, Ansible json-callback documents of every result shape, and
the CLI. Real Ansible over a real sshd is in collect/test_analyze_ansible.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from bsdcrypt.collect.analyze import STANDALONE_TOKEN, collect_file, parse_probe_output, standalone_script, to_status
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.pipeline import status_of
from bsdcrypt.probe import render
from bsdcrypt.recording import load

ROOT = Path(__file__).resolve().parents[2]
HOSTS = sorted((ROOT / "fixtures" / "hosts").glob("*.yaml"))
CLI = [sys.executable, "-c", "from bsdcrypt.cli import main; main()"]
KEYS = ("os", "cpu", "driver", "other_drivers", "persist", "geli", "findings", "root", "verdict")
GELI = ROOT / "fixtures" / "hosts" / "freebsd-12.2-bhyve-geli-software-aesni-kldloaded.yaml"
BUILTIN = ROOT / "fixtures" / "hosts" / "freebsd-13.0-hyperv-builtin.yaml"


def _raw(path: Path, token: str = STANDALONE_TOKEN) -> bytes:
    _, evidence = load(path)
    return render(evidence, token)


def _same(a: dict[str, object], b: dict[str, object]) -> None:
    for key in KEYS:
        assert a[key] == b[key], key


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return run_cli(*args, input=stdin, text=False)


# ---------------------------------------------------------------------------- probe-script


def test_probe_script_is_a_valid_sh_script_with_the_documented_token(tmp_path: Path) -> None:
    r = _cli("probe-script")
    assert r.returncode == 0
    script = r.stdout.decode()
    assert script.startswith("#!/bin/sh\n") and f"T={STANDALONE_TOKEN}\n" in script
    (tmp_path / "probe.sh").write_text(script)
    assert subprocess.run(["sh", "-n", str(tmp_path / "probe.sh")], check=False).returncode == 0
    assert script == standalone_script()


@pytest.mark.slow
def test_probe_script_token_option_and_validation() -> None:
    assert "T=@@bsdcrypt-site42\n" in _cli("probe-script", "--token", "@@bsdcrypt-site42").stdout.decode()
    bad = _cli("probe-script", "--token", "x; rm -rf /")
    assert bad.returncode == 3 and b"token" in bad.stderr
    with pytest.raises(BsdcryptError):
        standalone_script("@@bsdcrypt-a b")


@pytest.mark.slow
def test_the_standalone_probe_run_here_equals_status_local(tmp_path: Path) -> None:
    out = subprocess.run(["sh", "-c", standalone_script()], capture_output=True, check=True, timeout=120).stdout
    (tmp_path / "here.out").write_bytes(out)
    r = _cli("analyze", "-f", "json", str(tmp_path / "here.out"))
    local = json.loads(_cli("status", "-f", "json").stdout)
    got = json.loads(r.stdout)["hosts"][0]
    _same(got, local)
    assert r.returncode == local_code(local)


def local_code(doc: dict[str, object]) -> int:
    return {"ok": 0, "warning": 1, "critical": 2, "unknown": 3}[str(doc["verdict"])]


# ---------------------------------------------------------------------------- raw outputs


@pytest.mark.parametrize("path", HOSTS, ids=[p.stem for p in HOSTS])
def test_raw_output_of_every_recording_assesses_like_replay(path: Path) -> None:
    expected = status_of(ReplayHost.from_file(path)).to_dict()
    for data in (_raw(path), _raw(path).replace(b"\n", b"\r\n")):  # plain, and through a pty
        [c] = collect_file("h.out", data)
        assert c.error is None
        got = to_status(c).to_dict()
        _same(got, expected)
        assert got["source"] == "file:h.out"


def test_any_bsdcrypt_token_is_found_and_an_explicit_one_wins() -> None:
    data = _raw(GELI, "@@bsdcrypt-0123abcd")
    assert len(parse_probe_output(data).steps) > 10
    [c] = collect_file("x", data, token="@@bsdcrypt-0123abcd")
    assert c.evidence is not None
    [c] = collect_file("x", data, token="@@bsdcrypt-other")
    assert c.error_kind == "garbage"


def test_crlf_inside_a_file_survives_when_not_from_a_pty() -> None:
    from bsdcrypt.probe import Evidence, Step

    _, evidence = load(GELI)
    steps = dict(evidence.steps)
    steps["file:/boot/loader.conf"] = Step(0, b'geom_eli_load="YES"\r\naesni_load="YES"\r\n')
    [c] = collect_file("x", render(Evidence(steps), STANDALONE_TOKEN))
    assert c.evidence is not None
    assert c.evidence.file("/boot/loader.conf") == b'geom_eli_load="YES"\r\naesni_load="YES"\r\n'


def test_cut_off_output_is_an_unknown_row_not_a_half_assessment() -> None:
    data = _raw(GELI)
    [c] = collect_file("x.out", data[: len(data) // 2])
    assert c.error_kind == "cut-off"
    s = to_status(c)
    assert s.verdict == "unknown" and s.findings[0].id == "collect-cut-off"


@pytest.mark.parametrize("data", [b"", b"hello\n", b"\x00\xff" * 50, b"{not json", b"[1, 2]", b'{"a": 1}'])
def test_garbage_is_one_unknown_row(data: bytes) -> None:
    [c] = collect_file("junk", data)
    assert c.error_kind == "garbage"
    assert to_status(c).findings[0].id == "collect-garbage"


def test_recordings_are_accepted_too() -> None:
    [c] = collect_file(str(BUILTIN), BUILTIN.read_bytes())
    assert to_status(c).verdict == "ok" and c.source == f"replay:{BUILTIN}"


@pytest.mark.parametrize("path", HOSTS, ids=[p.stem for p in HOSTS])
def test_every_shipped_recording_analyzes_like_replay(path: Path) -> None:
    """Including those whose `# source:` header runs past the first kilobytes."""
    [c] = collect_file(str(path), path.read_bytes())
    assert c.error is None
    _same(to_status(c).to_dict(), status_of(ReplayHost.from_file(path)).to_dict())


# ---------------------------------------------------------------------------- Ansible documents


def _doc(*tasks: dict[str, dict[str, object]]) -> bytes:
    return json.dumps({
        "custom_stats": {}, "global_custom_stats": {},
        "plays": [{"play": {"name": "Ansible Ad-Hoc"},
                   "tasks": [{"task": {"name": f"t{i}"}, "hosts": hosts} for i, hosts in enumerate(tasks)]}],
        "stats": {},
    }).encode()


def _ok(path: Path, **extra: object) -> dict[str, object]:
    out = _raw(path).replace(b"\n", b"\r\n").decode("utf-8", "replace")
    return {"changed": True, "rc": 0, "stdout": out, "stderr": "", "stdout_lines": out.splitlines(), **extra}


def test_ansible_result_shapes() -> None:
    doc = _doc(
        {"facts": {"ansible_facts": {}}, "geli": {"changed": False}},  # e.g. a setup task first
        {
            "geli": _ok(GELI),
            "builtin": _ok(BUILTIN),
            "down": {"unreachable": True, "changed": False,
                     "msg": "Failed to connect to the host via ssh: ssh: connect to host down port 22: Connection refused"},
            "failed": {"failed": True, "rc": 127, "msg": "non-zero return code", "stdout": "", "stderr": "sh: not found"},
            "cut": _ok(GELI, rc=137),
            "skipped": {"skipped": True, "changed": False, "skip_reason": "Conditional result was False"},
        },
        {"geli": {"changed": False, "msg": "a later, unrelated task"}},
    )
    got = {c.target: c for c in collect_file("run.json", doc)}
    assert list(got) == ["facts", "geli", "builtin", "down", "failed", "cut", "skipped"]
    assert got["facts"].error_kind == "garbage"
    assert got["geli"].evidence is not None and got["builtin"].evidence is not None
    assert got["down"].error_kind == "unreachable" and "Connection refused" in (got["down"].error or "")
    assert got["failed"].error_kind == "failed" and got["cut"].error_kind == "cut-off"
    assert got["skipped"].error_kind == "skipped"
    s = to_status(got["geli"])
    assert s.host == "geli" and s.source == "ansible:run.json" and s.verdict == "critical"
    _same(s.to_dict(), status_of(ReplayHost.from_file(GELI)).to_dict())
    assert {to_status(got[h]).findings[0].id for h in ("down", "failed", "cut", "skipped")} == {
        "collect-unreachable", "collect-failed", "collect-cut-off", "collect-skipped"}


def test_ansible_tree_file_is_one_host_named_after_the_file(tmp_path: Path) -> None:
    [c] = collect_file(str(tmp_path / "fw1.example.org"), json.dumps(_ok(BUILTIN)).encode())
    assert c.target == "fw1.example.org" and to_status(c).verdict == "ok"


# ---------------------------------------------------------------------------- the CLI


@pytest.mark.slow
def test_cli_formats_exit_code_and_output_file(tmp_path: Path) -> None:
    (tmp_path / "a.out").write_bytes(_raw(GELI))
    (tmp_path / "b.json").write_bytes(_doc({"fw": _ok(BUILTIN)}))
    files = [str(tmp_path / "a.out"), str(tmp_path / "b.json")]
    table = _cli("analyze", *files)
    assert table.returncode == 2
    text = table.stdout.decode()
    assert text.index("CRITICAL") < text.index("OK ") and "2 hosts: 1 critical, 1 ok" in text
    for fmt in ("json", "yaml", "csv"):
        r = _cli("analyze", "-f", fmt, *files)
        assert r.returncode == 2 and b"vtbd1.eli" in r.stdout
    prom = tmp_path / "textfile" / "bsdcrypt.prom"
    prom.parent.mkdir()
    r = _cli("analyze", "-f", "prometheus", "-o", str(prom), *files)
    assert r.returncode == 2 and r.stdout == b""
    assert 'bsdcrypt_exit_code{host="fw",source="ansible:' in prom.read_text()
    assert sorted(p.name for p in prom.parent.iterdir()) == ["bsdcrypt.prom"]


@pytest.mark.slow
def test_cli_reads_stdin_and_directories(tmp_path: Path) -> None:
    r = _cli("analyze", "-", stdin=_raw(BUILTIN))
    assert r.returncode == 0
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "fw1").write_text(json.dumps(_ok(BUILTIN)))
    (tmp_path / "tree" / "db1").write_text(json.dumps(_ok(GELI)))
    r = _cli("analyze", "-f", "json", str(tmp_path / "tree"))
    assert r.returncode == 2
    assert sorted(h["host"] for h in json.loads(r.stdout)["hosts"]) == ["db1", "fw1"]


@pytest.mark.slow
def test_cli_errors_are_one_line_exit_3(tmp_path: Path) -> None:
    r = _cli("analyze", str(tmp_path / "missing.out"))  # a row saying so, exit 3 (unknown)
    assert r.returncode == 3 and b"cannot read" in r.stdout and b"unreadable" in r.stdout
    r = _cli("analyze", "-f", "nagios", str(BUILTIN))
    assert r.returncode == 3 and b"unknown format" in r.stderr
    r = _cli("analyze", str(tmp_path))  # an empty directory: nothing to analyze
    assert r.returncode == 3 and b"no input" in r.stderr


@pytest.mark.slow
def test_a_missing_file_is_a_row_and_the_rest_is_still_analyzed(tmp_path: Path) -> None:
    r = run_cli("analyze", str(BUILTIN), str(tmp_path / "nope.out"), "-f", "json")
    assert r.returncode == 3, r.stderr
    rows = json.loads(r.stdout)["hosts"]
    kinds = sorted(f["id"] for row in rows for f in row["findings"])
    assert "collect-unreadable" in kinds and len(rows) == 2


@pytest.mark.slow
def test_a_directory_skips_files_that_are_not_collected_output(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "fw1").write_text(json.dumps(_ok(BUILTIN)))  # ansible --tree: named after the host
    (tree / "db1.out").write_bytes(_raw(GELI))
    (tree / "README.md").write_text("# what we collected\n")
    (tree / "probe.sh").write_text("#!/bin/sh\necho hi\n")
    (tree / "fleet.json").write_text(json.dumps({"schema": 1, "hosts": []}))  # an earlier report
    (tree / "cut.out").write_bytes(_raw(BUILTIN)[:200])  # collected, but cut off: still a host
    (tree / "empty.out").write_bytes(b"")  # the engine collected nothing: still a host
    r = _cli("analyze", "-f", "json", str(tree))
    rows = {h["fleet"]["target"].rsplit("/", 1)[-1]: h for h in json.loads(r.stdout)["hosts"]}
    assert sorted(rows) == ["cut.out", "db1.out", "empty.out", "fw1"]
    assert rows["cut.out"]["findings"][0]["id"] == "collect-cut-off"
    assert rows["empty.out"]["findings"][0]["id"] == "collect-garbage"
    assert "empty" in rows["empty.out"]["findings"][0]["message"]
    notes = r.stderr.decode().splitlines()
    assert sorted(notes) == [f"bsdcrypt: skipped {tree / n}: not probe output, Ansible JSON or a recording"
                             for n in ("README.md", "fleet.json", "probe.sh")]
    assert r.returncode == 2  # the worst host: db1 is critical (outranks the unknown cut.out, empty.out)
    # named explicitly, the same file is a row: the user asked for it
    r = _cli("analyze", "-f", "json", str(tree / "README.md"))
    assert r.returncode == 3 and json.loads(r.stdout)["hosts"][0]["findings"][0]["id"] == "collect-garbage"


@pytest.mark.slow
def test_the_shipped_recordings_folder_analyzes_without_its_readme() -> None:
    r = _cli("analyze", "-f", "csv", str(ROOT / "fixtures" / "hosts"))
    assert b"collect-garbage" not in r.stdout and b"README.md" in r.stderr
    assert len(r.stdout.decode().splitlines()) - 1 == len(HOSTS)


@pytest.mark.slow
def test_a_directory_with_nothing_collected_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("notes\n")
    r = _cli("analyze", str(tmp_path))
    assert r.returncode == 3 and r.stdout == b"" and b"nothing to analyze" in r.stderr


@pytest.mark.slow
def test_csv_has_userland_aes_last_as_json_says_it() -> None:
    """The CSV's last column is userland OpenSSL's case, the same as JSON's userland_aes.case per host;
    columns added later go at the end, so scripts that count columns keep working."""
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(_cli("analyze", "-f", "csv", str(ROOT / "fixtures" / "hosts")).stdout.decode())))
    doc = json.loads(_cli("analyze", "-f", "json", str(ROOT / "fixtures" / "hosts")).stdout)
    want = [h["userland_aes"]["case"] or "" for h in doc["hosts"]]  # both in the report's order
    # later columns keep the earlier ones' positions: userland_aes, then issue 27's consumers_software
    assert list(rows[0])[-3:] == ["elapsed_s", "userland_aes", "consumers_software"]
    assert [r["userland_aes"] for r in rows] == want
    assert {"hidden-by-hypervisor", "cpu-without-aesni", "aesni-visible", "not-x86"} <= set(want)
