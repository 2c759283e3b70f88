"""Issue 11 part 4: every input is bounded and every malformed one gets one line (no traceback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.collect.analyze import collect_file
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.fsutil import read_input
from bsdcrypt.hostsfile import HostsFileError, read_hosts
from bsdcrypt.hostspec import MAX_NAME

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=300, **kw)


@pytest.mark.slow
def test_analyze_dev_zero_is_one_row_naming_it() -> None:
    """/dev/zero never ends: it is not a regular file, refused before a byte is read; the row says why."""
    r = run("analyze", "/dev/zero", "-f", "csv")
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert "cannot read input /dev/zero: it is a character device, not a regular file" in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fleet-audit", "/dev/zero"], "cannot read hosts file /dev/zero: it is a character device, not a regular file"),
        (["status", "-H", "replay:{big}"], "recording {big} is larger than 16 MiB"),
        (["fleet-audit", "{hosts}", "-F", "{cfg}"], "cannot read ssh config /dev/zero: it is a character device, not a regular file"),
    ],
)
def test_endless_inputs_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("192.0.2.1\n")
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(17 << 20)  # sparse: a 17 MiB file without the disk use
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Include /dev/zero\n")  # an Include's match is read like the file itself
    r = run(*[a.replace("{hosts}", str(hosts)).replace("{big}", str(big)).replace("{cfg}", str(cfg)) for a in args])
    message = message.replace("{big}", str(big))
    assert r.returncode == 3, r.stderr
    assert message in r.stderr and r.stderr.count("\n") == 1 and r.stdout == ""


def test_a_big_known_hosts_file_is_one_error(tmp_path: Path) -> None:
    from bsdcrypt.ssh.hostkeys import MAX_KNOWN_HOSTS, KnownHosts

    big = tmp_path / "known_hosts"
    with open(big, "wb") as fh:
        fh.truncate(MAX_KNOWN_HOSTS + 1)  # sparse: no real disk use
    with pytest.raises(BsdcryptError, match="is larger than 64 MiB"):
        KnownHosts().load(str(big))


@pytest.mark.parametrize("limit", [0, 1, 10, 4096])
def test_read_input_reads_at_most_its_limit(tmp_path: Path, limit: int) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x" * limit)
    assert read_input(str(f), limit, "input") == b"x" * limit
    f.write_bytes(b"x" * (limit + 1))
    with pytest.raises(BsdcryptError, match=f"input {f} is larger than"):
        read_input(str(f), limit, "input")
    with pytest.raises(BsdcryptError, match="it is a folder"):
        read_input(str(tmp_path), limit, "input")


# ---------------------------------------------------------------------------- analyze: JSON of any shape

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["plays", "tasks", "hosts", "stdout", "rc", "msg", "failed", "unreachable", "skipped", "h"]),
        inner, max_size=4,
    ),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(doc=st.dictionaries(st.sampled_from(["plays", "stdout", "rc", "failed"]), json_values, min_size=1))
def test_json_of_any_shape_is_rows_never_an_exception(doc: dict[str, object]) -> None:
    rows = collect_file("run.json", json.dumps(doc).encode())
    assert rows and all(r.evidence is not None or r.error_kind for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    ['{"plays": 5}', '{"plays": [5]}', '{"plays": [{"tasks": 5}]}', '{"plays": [{"tasks": [{"hosts": [1]}]}]}',
     '{"plays": "x"}', '{"a": ' + "[" * 100_000],
)
def test_analyze_json_of_the_wrong_shape_is_a_garbage_row(tmp_path: Path, text: str) -> None:
    f = tmp_path / "run.json"
    f.write_text(text)
    r = run("analyze", str(f), "-f", "csv")
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    assert ",garbage," in r.stdout


# ---------------------------------------------------------------------------- hosts files


@pytest.mark.slow
def test_a_non_utf8_line_is_file_line_reason(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_bytes(b"good.example\n\xff\xfebad.example\nalso-good.example\n")
    r = run("fleet-audit", str(hosts), "-q")
    assert r.returncode == 3
    assert r.stderr == f"{hosts}:2: not UTF-8 text (byte 0xff at column 1)\n"


@pytest.mark.slow
def test_a_100000_character_host_name_is_rejected_as_a_name_not_echoed(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("h" + "a" * 99_999 + "\n")
    r = run("fleet-audit", str(hosts), "-q")
    assert r.returncode == 3
    assert r.stderr == f"{hosts}:1: the host name is 100000 characters long: not a name (at most {MAX_NAME})\n"
    r = run("status", "-H", "h" + "a" * 99_999)
    assert r.returncode == 3 and len(r.stderr) < 400 and "100000 characters" in r.stderr


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300))
def test_any_bytes_are_hosts_or_file_line_errors(data: bytes) -> None:
    """Property: a hosts file of any bytes gives entries or HostsFileError lines `FILE:N: reason`,
    each short and printable, never another exception."""
    try:
        read_hosts(data, "h.txt")
    except HostsFileError as exc:
        for line in exc.lines:
            assert line.startswith("h.txt:") and len(line) < 400
            assert line.isprintable() or "\\" in repr(line)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(name=st.text(st.sampled_from("ab.-_1"), min_size=MAX_NAME + 1, max_size=3 * MAX_NAME))
def test_names_longer_than_dns_allows_are_not_names(name: str) -> None:
    with pytest.raises(HostsFileError, match="characters long: not a name|bad host name"):
        read_hosts(f"x{name}\n", "h.txt")


# ---------------------------------------------------------------------------- Ctrl-C while starting


@pytest.mark.slow
def test_ctrl_c_while_importing_typer_is_one_line_and_130(tmp_path: Path) -> None:
    """A stand-in `typer` first on the path tells the test the import has begun and waits there: the
    SIGINT arrives during the import, on an event, not on a guess of how long imports take."""
    shadow = tmp_path / "typer"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("import sys, time\nprint('importing', flush=True)\ntime.sleep(3600)\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    p = subprocess.Popen([sys.executable, "-m", "bsdcrypt", "status"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        assert p.stdout is not None and p.stdout.readline() == "importing\n"
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 130
    assert err == "bsdcrypt: interrupted\n"
