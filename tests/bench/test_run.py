"""bsdcrypt bench against a scripted FreeBSD host: the sequence, fault injection at every step, interrupts,
cleanup, and the realism of the scripted host."""

from __future__ import annotations

import shlex

import pytest
from bench_host import PARAMS, ScriptedHost, fio_fixture, happy_commands, humanize, size_bytes

from bsdcrypt.bench.model import (
    LABEL,
    ST_CREATE,
    ST_DESTROY,
    ST_DETACH,
    ST_FIO,
    ST_GELI,
    ST_GELI_LIST,
    ST_LEFTOVERS,
    ST_MDLIST,
    ST_ONETIME,
    ST_ROOT,
    BenchError,
    BenchInterrupted,
    BenchParams,
    HostFacts,
)
from bsdcrypt.bench.run import measure
from bsdcrypt.hostapi import RunResult


def test_happy_path_sequence_and_numbers() -> None:
    host = ScriptedHost()
    result = measure(host, PARAMS)
    cmds = host.commands
    assert cmds[0] == "id -u"
    assert cmds[1] == "fio --version"
    assert f"mdconfig -a -t swap -s 1024m -L {LABEL} -u 1" in cmds
    create = cmds.index(f"mdconfig -a -t swap -s 1024m -L {LABEL} -u 1")
    assert any(c.startswith("umask 022; S=/var/run/bsdcrypt-bench.units;") for c in cmds[:create])  # recorded first
    assert "geli onetime -e AES-XTS -l 128 -s 4096 md1" in cmds  # md0 existed before: never touched
    assert "geli list md1.eli" in cmds
    fio_cmds = [c for c in cmds if c.startswith("exec fio ")]
    assert len(fio_cmds) == 4  # write+read on md1.eli, write+read on the bare md (ceiling)
    first = shlex.split(fio_cmds[0].removeprefix("exec "))
    assert "--filename=/dev/md1.eli" in first and "--rw=write" in first and "--end_fsync=1" in first
    assert "--ioengine=posixaio" in first and "--numjobs=20" in first and "--iodepth=16" in first
    assert "--time_based" in first and "--runtime=10" in first and "--output-format=json" in first
    assert "--group_reporting" in first
    assert "geli detach md1.eli" in cmds and "mdconfig -d -u 1" in cmds
    assert not any(" md0" in c or "-u 0" in c or "/dev/md0" in c for c in cmds)
    assert host.leaked() == []
    assert host.state_file is None
    assert result.crypto == "accelerated software" and result.accelerated is True
    assert result.geli_algorithm == "AES-XTS" and result.geli_keylength == 128
    assert result.fio_version == "fio-3.36"
    assert result.host.release == "14.1-RELEASE-p5" and result.host.ncpu == 20
    assert result.numjobs == 20
    g = result.get("geli", "write")
    assert g is not None and g.single and g.spread_pct is None
    assert g.median_bw == pytest.approx(4108894963)
    assert result.ceiling_fraction("write") == pytest.approx(1.0)
    assert any("single run" in w for w in result.warnings)
    assert result.cleanup.ok


def test_repeat_gives_median_and_spread() -> None:
    host = ScriptedHost()
    result = measure(host, BenchParams(repeat=3, ceiling=False, directions=("write",)))
    m = result.get("geli", "write")
    assert m is not None and len(m.samples) == 3 and m.spread_pct == pytest.approx(0.0)
    assert result.get("md", "write") is None
    assert not any("single run" in w for w in result.warnings)
    assert host.leaked() == []


def test_record_is_json_serialisable() -> None:
    import json

    result = measure(ScriptedHost(), PARAMS, facts=HostFacts(driver="aesni", driver_state="builtin"))
    rec = json.loads(json.dumps(result.to_record()))
    assert rec["kind"] == "bsdcrypt-bench"
    assert rec["host"]["driver_state"] == "builtin" and rec["host"]["release"] == "14.1-RELEASE-p5"
    assert rec["crypto_mode"] == "accelerated software"
    assert rec["fio_version"] == "fio-3.36"
    assert rec["parameters"]["numjobs"] == 20 and rec["parameters"]["keylen"] == 128
    assert {r["target"] for r in rec["results"]} == {"geli", "md"}


HAPPY = happy_commands()

# which step a failing command must be reported as (mdconfig -l runs in two steps)
STEP_OF_KIND = {
    "id": {ST_ROOT},
    "fio-version": {ST_FIO},
    "geli-check": {ST_GELI},
    "mdconfig-list": {ST_LEFTOVERS, ST_MDLIST},
    "mdconfig-attach": {ST_CREATE},
    "mdconfig-detach": {ST_DESTROY},
    "geli-onetime": {ST_ONETIME},
    "geli-list": {ST_GELI_LIST},
    "geli-detach": {ST_DETACH},
}
TOLERATED = {"sysctl", "swapinfo", "state-read", "state-write", "test"}


@pytest.mark.parametrize("index", range(len(HAPPY)), ids=[f"{i}:{c[:40]}" for i, c in enumerate(HAPPY)])
def test_each_step_failing_cleans_up_and_names_the_step(index: int) -> None:
    host = ScriptedHost(fail_at=index)
    kind = host.kind(HAPPY[index])
    try:
        result = measure(host, PARAMS)
    except BenchError as exc:
        msg = str(exc)
        if kind == "fio":
            assert exc.step.startswith("fio ") and exc.step in msg
        elif kind == "sysctl":  # no numbers for the memory check: still runs, so this is another step
            pytest.fail(f"a sysctl failure must not abort the bench: {msg}")
        else:
            assert exc.step in STEP_OF_KIND[kind], (kind, exc.step)
        assert f"bench step '{exc.step}' failed" in msg
        assert exc.cleanup is not None and exc.cleanup.ok, msg
        assert ("cleanup removed" in msg) == bool(exc.cleanup.removed)
    else:
        assert kind in TOLERATED or index == len(HAPPY) - 1, f"{kind} failure was ignored"
        assert result.cleanup.ok
    assert host.leaked() == [], host.commands[index:]
    assert host.md.keys() >= {"md0"}  # the md that existed before is never touched


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("index", range(len(HAPPY)), ids=[f"{i}:{c[:40]}" for i, c in enumerate(HAPPY)])
def test_interrupt_at_each_step_cleans_up(index: int, after: bool) -> None:
    host = ScriptedHost(interrupt_at=index, interrupt_after=after)
    with pytest.raises(BenchInterrupted) as info:
        measure(host, PARAMS)
    exc = info.value
    assert exc.step is not None and f"during step '{exc.step}'" in str(exc)
    assert exc.cleanup is not None and exc.cleanup.ok, str(exc)
    assert host.leaked() == [], host.commands[index:]
    assert "md0" in host.md


def test_sigterm_is_turned_into_an_interrupt_and_cleans_up() -> None:
    import os
    import signal

    class TermHost(ScriptedHost):
        def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
            result = super().run(command, input=input, timeout=timeout)
            if command.startswith("exec fio ") and "--rw=write" in command and ".eli" in command:
                os.kill(os.getpid(), signal.SIGTERM)
            return result

    host = TermHost()
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(BenchInterrupted) as info:
        measure(host, PARAMS)
    assert "SIGTERM" in str(info.value)
    assert host.leaked() == []
    assert signal.getsignal(signal.SIGTERM) == before  # handler restored


def test_interrupted_fio_holding_the_device_is_forced_away() -> None:
    idx = next(i for i, c in enumerate(HAPPY) if c.startswith("exec fio ") and ".eli" in c)
    host = ScriptedHost(interrupt_at=idx, fio_holds_open=True)
    with pytest.raises(BenchInterrupted) as info:
        measure(host, PARAMS)
    assert "geli detach -f md1.eli" in host.commands
    assert info.value.cleanup is not None and info.value.cleanup.ok
    assert host.leaked() == []


def test_what_cannot_be_removed_is_reported() -> None:
    idx = next(i for i, c in enumerate(HAPPY) if c.startswith("exec fio ") and ".eli" in c)
    host = ScriptedHost(fail_at=idx, stuck={"md1.eli", "md1"})
    with pytest.raises(BenchError) as info:
        measure(host, PARAMS)
    msg = str(info.value)
    assert "cleanup could NOT remove: md1.eli" in msg and "md1 (" in msg
    assert "bsdcrypt bench cleanup" in msg
    assert info.value.cleanup is not None and not info.value.cleanup.ok


def test_eli_that_resists_detach_goes_with_its_forced_md() -> None:
    idx = next(i for i, c in enumerate(HAPPY) if c.startswith("exec fio ") and ".eli" in c)
    host = ScriptedHost(fail_at=idx, stuck={"md1.eli"})
    with pytest.raises(BenchError) as info:
        measure(host, PARAMS)
    assert "mdconfig -d -u 1 -o force" in host.commands
    assert info.value.cleanup is not None and info.value.cleanup.ok
    assert sorted(info.value.cleanup.removed) == ["md1", "md1.eli"]
    assert host.leaked() == []


def test_preflight_errors_are_clear() -> None:
    with pytest.raises(BenchError, match="must run as root"):
        measure(ScriptedHost(uid=1001), PARAMS)
    with pytest.raises(BenchError, match="pkg install fio"):
        measure(ScriptedHost(has_fio=False), PARAMS)
    with pytest.raises(BenchError, match="smaller --size"):
        measure(ScriptedHost(), BenchParams(size_mib=64 * 1024))
    with pytest.raises(BenchError, match="keylen"):
        measure(ScriptedHost(), BenchParams(keylen=192))


def test_md_name_validation() -> None:
    """The unit is the one bsdcrypt chose (`-u N`): whatever mdconfig prints is never read, and a
    name that is no md unit, or one that existed before, is refused before any command names it."""
    from bsdcrypt.bench.devices import Devices

    class WeirdHost(ScriptedHost):
        def _execute(self, kind: str, command: str) -> RunResult:
            result = super()._execute(kind, command)
            if kind == "mdconfig-attach":
                return RunResult(result.rc, b"ada0\n", result.stderr)
            return result

    host = WeirdHost()
    measure(host, PARAMS)
    assert not any("ada0" in c for c in host.commands) and host.leaked() == []
    devices = Devices()
    devices.before = {"md0"}
    for name in ("ada0", "md0"):
        with pytest.raises(BenchError, match="not an md|existed before"):
            devices.adopt_md(name)


# --------------------------------------------------------------------------- interrupts during cleanup


def test_sigterm_while_cleaning_up_after_a_failed_step_is_an_interrupt() -> None:
    import os
    import signal

    class TermDuringCleanup(ScriptedHost):
        def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
            if command.startswith("geli detach"):
                os.kill(os.getpid(), signal.SIGTERM)  # arrives while cleanup runs: deferred
            return super().run(command, input=input, timeout=timeout)

    idx = next(i for i, c in enumerate(HAPPY) if c.startswith("exec fio ") and ".eli" in c)
    host = TermDuringCleanup(fail_at=idx)
    with pytest.raises(BenchInterrupted) as info:
        measure(host, PARAMS)
    exc = info.value
    assert exc.reason == "SIGTERM" and exc.step == "fio write on md1.eli"
    assert exc.error is not None and "Operation not permitted" in exc.error
    assert "while cleaning up after step 'fio write on md1.eli' failed" in str(exc)
    assert exc.cleanup is not None and exc.cleanup.ok
    assert host.leaked() == []


# --------------------------------------------------------------------------- realism of the scripted host


def test_humanize_matches_mdconfig_lengths() -> None:
    assert [humanize(size_bytes(s)) for s in ("64m", "512m", "1024m", "1000m", "2g")] == [
        "64M", "512M", "1024M", "1000M", "2048M"
    ]
    assert humanize(10000 << 20) == "9.8G" and humanize(16 << 30) == "16G"
    from bsdcrypt.parsers.mdconfig import parse_human_size, parse_md_rows

    assert parse_human_size("  1.0G") == 1 << 30 and parse_human_size(" 1024M") == 1 << 30
    rows, labels = parse_md_rows("md0\tswap\t  1.0G\t-\tbsdcrypt-bench\tcompress\n")
    assert labels and rows[0].size == 1 << 30 and rows[0].label == LABEL
    rows, labels = parse_md_rows("md0\tswap\t  1.0G\nmd1\tvnode\t   64M\t/tmp/img\n")
    assert not labels and [r.size for r in rows] == [1 << 30, 64 << 20]


def test_keylen_256_reaches_geli_and_the_result() -> None:
    host = ScriptedHost()
    result = measure(host, BenchParams(keylen=256, ceiling=False, directions=("write",)))
    assert "geli onetime -e AES-XTS -l 256 -s 4096 md1" in host.commands
    assert result.geli_keylength == 256 and result.to_record()["geli"]["key_length"] == 256


def test_a_provider_that_never_appeared_fails_geli_list_with_freebsds_message() -> None:
    host = ScriptedHost(onetime_silently_fails=True)
    with pytest.raises(BenchError) as info:
        measure(host, PARAMS)
    assert info.value.step == ST_GELI_LIST
    assert "Class 'ELI' does not have an instance named 'md1.eli'." in str(info.value)
    assert host.leaked() == []


def test_failure_messages_name_the_device_of_the_run() -> None:
    idx = next(i for i, c in enumerate(HAPPY) if c.startswith("exec fio ") and ".eli" in c)
    host = ScriptedHost(fail_at=idx)
    with pytest.raises(BenchError) as info:
        measure(host, PARAMS)
    assert "func=open(/dev/md1.eli)" in str(info.value) and "md0" not in str(info.value)


def test_geli_preflight_looks_in_the_kernel_module_path() -> None:
    host = ScriptedHost()
    measure(host, PARAMS)
    check = next(c for c in host.commands if c.startswith("command -v geli"))
    assert "kldstat -q -m g_eli" in check and "sysctl -n kern.module_path" in check
    assert "geom_eli.ko" in check and "/boot/kernel/geom_eli.ko" not in check


def test_fio_json_without_disk_util_as_freebsd_prints_it() -> None:
    from bsdcrypt.parsers.fio import parse

    text = fio_fixture("fio-3.33-debian-posixaio-tmpfs-no-disk-util.txt")
    assert "disk_util" not in text
    r = parse(text)
    assert not r.has_disk_util
    w = r.direction("write")
    assert w is not None and w.bw_bytes > 0

    class NoDiskUtilHost(ScriptedHost):
        def _execute(self, kind: str, command: str) -> RunResult:
            if kind == "fio" and "--rw=write" in command:
                super()._execute(kind, command)
                return self._ok(text)
            return super()._execute(kind, command)

    result = measure(NoDiskUtilHost(), BenchParams(directions=("write",)))
    g = result.get("geli", "write")
    assert g is not None and g.median_bw == pytest.approx(w.bw_bytes)
