"""Run the real fio with the job options bench generates, on a temporary FILE, and parse
its JSON with bsdcrypt's parser. Never touches a disk, a GELI provider or an md device."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bsdcrypt.bench.model import BenchParams, fio_args
from bsdcrypt.parsers.fio import parse

FIO = shutil.which("fio")
if FIO is None and os.environ.get("BSDCRYPT_REQUIRE_FIO"):
    raise RuntimeError("BSDCRYPT_REQUIRE_FIO is set but fio is not installed")
pytestmark = pytest.mark.skipif(FIO is None, reason="fio is not installed (apt-get install fio)")


def _engine() -> str:
    """posixaio as on FreeBSD when this fio has it, else psync."""
    assert FIO is not None
    out = subprocess.run([FIO, "--enghelp"], capture_output=True, text=True, check=False).stdout
    return "posixaio" if "posixaio" in out.split() else "psync"


@pytest.mark.slow
@pytest.mark.parametrize("direction", ["write", "read"])
def test_real_fio_runs_our_job_and_the_parser_reads_it(tmp_path: Path, direction: str) -> None:
    params = BenchParams(runtime_s=1, ioengine=_engine())
    target = tmp_path / "bench.dat"
    argv = fio_args(params, str(target), direction, numjobs=2, size="8m")
    assert argv[0] == "fio"
    assert not any(a.startswith("--filename=/dev/") for a in argv)
    proc = subprocess.run(
        [FIO, *argv[1:]], capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    result = parse(proc.stdout)
    assert result.version and result.version.startswith("fio-")
    assert result.errors == ()
    assert len(result.jobs) == 1  # group_reporting folds numjobs=2 into one entry
    job = result.jobs[0]
    assert job.options["rw"] == direction
    assert job.options["numjobs"] == "2"
    assert job.options["ioengine"] == params.ioengine
    assert job.options["iodepth"] == "16"
    assert job.options["bs"] == "1m"
    if direction == "write":
        assert job.options["end_fsync"] == "1"
    d = result.direction(direction)
    assert d is not None
    assert d.bw_bytes > 0 and d.iops > 0 and d.io_bytes > 0
    assert 900 <= d.runtime_ms <= 5000  # time_based with runtime=1 s
    assert d.bw_bytes == pytest.approx(1000 * d.io_bytes / d.runtime_ms, rel=0.01)
    other = "read" if direction == "write" else "write"
    assert result.direction(other) is None
