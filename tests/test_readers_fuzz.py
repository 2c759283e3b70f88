"""Issue 26, the property every file reader holds: random bytes (and random JSON/YAML-looking text) end
in a result or one BsdcryptError line, in bounded time, never another exception or a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bsdcrypt.bench.records import load as load_bench_record
from bsdcrypt.collect.analyze import collect_file
from bsdcrypt.collect.paste import evidence_from_paste
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.fsutil import read_input
from bsdcrypt.hostsfile import HostsFileError, read_hosts
from bsdcrypt.loader.conf import set_yes
from bsdcrypt.loader.model import outcomes
from bsdcrypt.recording import load as load_recording

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# bytes that look like the formats, so the readers get past their first checks
_texty = st.one_of(
    st.binary(max_size=600),
    st.lists(st.sampled_from([b"bsdcrypt_recording: 1\n", b"steps:\n", b"  uname_s: {rc: 0, out: x}\n", b"{", b"}",
                              b'"plays": [', b"]", b"&a ", b"*a", b"@@bsdcrypt-x begin uname_s\n", b"\xff\xfe",
                              b'aesni_load="YES"\r\n', b"loader_conf_files=\"/x\"\n", b"kldstat -v\n", b"\x1b[31m",
                              b'{"started": 1, "host": {}}', b"\n"]), max_size=20).map(b"".join),
)


def _one_line(exc: BaseException) -> None:
    assert isinstance(exc, BsdcryptError), repr(exc)
    if isinstance(exc, HostsFileError):  # one FILE:LINE line per bad line, by design
        assert all("\n" not in line for line in exc.lines) and len(exc.lines) <= 21
        return
    assert "\n" not in str(exc) and len(str(exc)) < 2000


@pytest.mark.slow
@SETTINGS
@given(data=_texty)
def test_every_file_reader_takes_any_bytes(tmp_path: Path, data: bytes) -> None:
    f = tmp_path / "input"
    f.write_bytes(data)
    raw = read_input(str(f), 1 << 20, "input")
    assert raw == data
    rows = collect_file(str(f), raw)  # analyze: rows, never an exception
    assert rows and all(r.evidence is not None or r.error for r in rows)
    for reader in (lambda: load_recording(f), lambda: load_bench_record(f), lambda: read_hosts(raw, str(f))):
        try:
            reader()
        except BsdcryptError as exc:
            _one_line(exc)
    evidence_from_paste(raw.decode("utf-8", "replace"))
    files = [("/boot/loader.conf", raw)]
    outcomes(files, "aesni", None)
    try:
        set_yes(files)
    except ValueError as exc:  # EditError: the editor refuses what it cannot prove
        assert "\n" not in str(exc)


@pytest.mark.parametrize("spec", ["replay:/dev/zero", "replay:/dev/null", "replay:{fifo}", "replay:{dir}", "replay:{big}"])
def test_status_on_a_hostile_replay_path_is_one_line(tmp_path: Path, spec: str) -> None:
    import os

    fifo = tmp_path / "r.fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(1 << 30)
    spec = spec.replace("{fifo}", str(fifo)).replace("{dir}", str(tmp_path)).replace("{big}", str(big))
    r = run_cli("status", "-H", spec, timeout=300)
    assert r.returncode == 3 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert any(w in r.stderr for w in ("not a regular file", "a folder", "larger than")), r.stderr


def test_json_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    """`[[[[...`: Python's JSON parser recurses; a bench record or an image's OPNsense version file that deep is
    one line (or ignored), never a RecursionError traceback."""
    from bsdcrypt.bench.records import BenchRecordError
    from bsdcrypt.enable.remote import opnsense_version_line

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    with pytest.raises(BenchRecordError, match="nested too deep"):
        load_bench_record(deep)
    assert opnsense_version_line('{"product_name": ' + "[" * 100_000) is None
    assert opnsense_version_line('{"product_name": "OPNsense", "product_version": "24.1", "x": ' + "[" * 50 + "]" * 50
                                  + "}") == "OPNsense 24.1 (unknown/unknown)"
