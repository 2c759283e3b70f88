"""fio JSON of several generations -> bytes/s, IOPS, runtime per direction."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsdcrypt.parsers.fio import FioParseError, parse

FIO_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "fio"


def fixture(name: str) -> str:
    """Fixture text after its `# source:` / `# context:` / `# ---` header."""
    text = (FIO_FIXTURES / name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    assert lines[0].startswith("# source:"), f"{name}: first line must be '# source:'"
    for i, line in enumerate(lines[:10]):
        if line.rstrip("\n") == "# ---":
            return "".join(lines[i + 1 :])
    raise AssertionError(f"{name}: no '# ---' header line")


def test_every_fixture_has_a_source_and_parses() -> None:
    names = sorted(p.name for p in FIO_FIXTURES.glob("*.txt"))
    assert len(names) >= 5
    for name in names:
        result = parse(fixture(name))
        assert result.jobs, name


def test_fio_3_33_with_note_preamble() -> None:
    r = parse(fixture("fio-3.33-lkp-falloc-note-preamble.txt"))
    assert r.version == "fio-3.33"
    assert r.version_tuple == (3, 33)
    assert r.preamble == (
        "note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1",
    )
    w = r.direction("write")
    assert w is not None
    assert w.bw_bytes == 1950180255  # bw_bytes taken as printed
    assert w.iops == pytest.approx(476118.226321)
    assert w.runtime_ms == 70475
    assert w.io_bytes == 137438953472
    assert w.clat_mean_ns == pytest.approx(1894.879822)
    assert r.direction("read") is None  # no I/O in that direction
    assert r.global_options["ioengine"] == "falloc"


def test_fio_3_1_without_bw_bytes_uses_io_bytes_over_runtime() -> None:
    r = parse(fixture("fio-3.1-gvisor-sample-no-bw_bytes.txt"))
    w = r.direction("write")
    assert w is not None
    # io_bytes is bytes in 3.x: 1000 * 1073741824 / 598 ms
    assert w.bw_bytes == pytest.approx(1000 * 1073741824 / 598)
    # consistent with the KiB/s figure fio printed (truncated)
    assert w.bw_bytes / 1024 == pytest.approx(1753471, rel=1e-5)
    assert w.io_bytes == 1073741824
    assert w.clat_mean_ns is None  # the sample carries no latency objects
    # the edited read side has bw but no I/O: reported as no read I/O, not as 126 MB/s
    assert r.direction("read") is None


def test_fio_2_17_group_reporting_kib_io_bytes_and_usec_latency() -> None:
    r = parse(fixture("fio-2.17-pkb-group-reporting-numjobs2.txt"))
    assert r.version_tuple == (2, 17)
    assert r.groups == (0, 1)
    assert not r.has_disk_util
    with pytest.raises(FioParseError):
        r.direction("read")  # two stonewalled groups: must say which
    rd = r.direction("read", groupid=0)
    assert rd is not None
    assert rd.io_bytes == 1294256 * 1024  # fio 2.x io_bytes is KiB
    assert rd.bw_bytes / 1024 == pytest.approx(129386, rel=1e-4)
    assert rd.iops == pytest.approx(8086.673998)
    assert rd.runtime_ms == 10003
    assert rd.clat_mean_ns == pytest.approx(238357.679)  # usec -> ns
    assert rd.lat_mean_ns == pytest.approx(245531.122)
    wr = r.direction("write", groupid=1)
    assert wr is not None and wr.bw_bytes / 1024 == pytest.approx(39312, rel=1e-4)
    assert r.direction("write", groupid=0) is None


def test_fio_2_2_10_disk_util_and_kib() -> None:
    r = parse(fixture("fio-2.2.10-cloud-doc-disk-util.txt"))
    assert r.has_disk_util
    w = r.direction("write")
    assert w is not None
    assert w.bw_bytes / 1024 == pytest.approx(62499, rel=1e-4)
    assert w.io_bytes == 37500272 * 1024
    assert w.total_ios == 9374944


def test_fio_3_33_group_reporting_of_our_own_job() -> None:
    r = parse(fixture("fio-3.33-debian-posixaio-group-reporting.txt"))
    assert len(r.jobs) == 1  # numjobs=2 aggregated by group_reporting
    assert r.jobs[0].options["numjobs"] == "2"
    w = r.direction("write")
    assert w is not None and w.bw_bytes > 0 and w.iops > 0
    assert w.bw_bytes == pytest.approx(1000 * w.io_bytes / w.runtime_ms, rel=1e-6)


def test_jobs_without_group_reporting_are_summed() -> None:
    text = """{
  "fio version" : "fio-3.36",
  "jobs" : [
    {"jobname" : "w", "groupid" : 0, "error" : 0,
     "write" : {"io_bytes" : 1048576000, "bw_bytes" : 104857600, "iops" : 100.0, "runtime" : 10000,
                "total_ios" : 1000, "clat_ns" : {"mean" : 1000.0}, "lat_ns" : {"mean" : 1100.0}}},
    {"jobname" : "w", "groupid" : 0, "error" : 0,
     "write" : {"io_bytes" : 524288000, "bw_bytes" : 52428800, "iops" : 50.0, "runtime" : 10002,
                "total_ios" : 500, "clat_ns" : {"mean" : 4000.0}, "lat_ns" : {"mean" : 4100.0}}}
  ]
}"""
    w = parse(text).direction("write")
    assert w is not None
    assert w.bw_bytes == 104857600 + 52428800
    assert w.iops == 150.0
    assert w.runtime_ms == 10002
    assert w.clat_mean_ns == pytest.approx((1000 * 1000 + 4000 * 500) / 1500)


def test_no_version_string_decides_units_by_io_kbytes() -> None:
    old = (
        '{"jobs":[{"jobname":"a","groupid":0,"error":0,'
        '"write":{"io_bytes":1000,"bw":100,"iops":25,"runtime":10000}}]}'
    )
    new = (
        '{"jobs":[{"jobname":"a","groupid":0,"error":0,'
        '"write":{"io_bytes":1024000,"io_kbytes":1000,"bw":100,"iops":25,"runtime":10000}}]}'
    )
    assert parse(old).direction("write").io_bytes == 1024000  # type: ignore[union-attr]
    assert parse(new).direction("write").io_bytes == 1024000  # type: ignore[union-attr]


def test_job_error_is_reported() -> None:
    text = '{"fio version":"fio-3.36","jobs":[{"jobname":"x","groupid":0,"error":5,"write":{"io_bytes":0}}]}'
    assert parse(text).errors == (("x", 5),)


def test_trailer_and_warnings_around_the_json() -> None:
    body = fixture("fio-3.1-gvisor-sample-no-bw_bytes.txt")
    text = "fio: engine posixaio: warning\n" + body + "fio: terminating\n"
    r = parse(text)
    assert r.preamble == ("fio: engine posixaio: warning",)
    assert r.trailer == ("fio: terminating",)


@pytest.mark.parametrize(
    "text",
    ["", "fio: failed to open /dev/md0.eli: Permission denied\n", "{not json\n", '{"a": 1}\n', "[1, 2]"],
)
def test_no_fio_json_is_an_error(text: str) -> None:
    with pytest.raises(FioParseError):
        parse(text)
