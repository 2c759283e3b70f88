"""The bench's state file and owner identity (bench/state.py): whose leftovers are whose, what a run or
`bench --cleanup` may remove, with and without md labels."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_host import PARAMS, Md, ScriptedHost, happy_commands

from bsdcrypt.bench.model import LABEL, ST_LEFTOVERS, BenchError, BenchInterrupted, CleanupReport
from bsdcrypt.bench.run import cleanup_leftovers, measure
from bsdcrypt.bench.state import controller_name
from bsdcrypt.hostapi import RunResult

HAPPY = happy_commands()


def test_leftovers_are_detected_and_cleanup_removes_only_ours() -> None:
    # a crashed run left md1 (labelled) with md1.eli on it; md0 and md2 are someone else's
    host = ScriptedHost(preexisting={"md0": Md("malloc", "64m", None), "md2": Md("swap", "512m", "scratch")})
    host.md["md1"] = Md("swap", "1024m", LABEL)
    host.eli.add("md1.eli")
    with pytest.raises(BenchError) as info:
        measure(host, PARAMS)
    assert info.value.step == ST_LEFTOVERS
    assert "md1" in str(info.value) and "bsdcrypt bench cleanup" in str(info.value)
    assert "md1" in host.md  # not touched without --cleanup
    report = cleanup_leftovers(host)
    assert sorted(report.removed) == ["md1", "md1.eli"] and report.ok
    assert set(host.md) == {"md0", "md2"} and not host.eli


def _dead_pid() -> int:
    """The pid of a process that has exited (reaped): what a crashed bsdcrypt leaves in the state file."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _owner(pid: int, where: str | None = None) -> str:
    return f"{pid}@{where or controller_name()}"


def test_leftover_from_state_file_without_label_support() -> None:
    host = ScriptedHost(label_support=False)
    host.md["md1"] = Md("swap", "1024m", None)
    host.state_file = f"1732000000 md1 {_owner(_dead_pid())} swap 1073741824\n"
    report = cleanup_leftovers(host)
    assert report.removed == ["md1"]
    # a state file from an earlier boot is ignored: that md1 is not ours
    host2 = ScriptedHost(label_support=False)
    host2.md["md1"] = Md("swap", "1024m", None)
    host2.state_file = f"1600000000 md1 {_owner(_dead_pid())} swap 1073741824\n"
    assert cleanup_leftovers(host2).removed == []
    assert "md1" in host2.md


def test_old_mdconfig_without_label_falls_back_to_state_file() -> None:
    host = ScriptedHost(label_support=False)
    result = measure(host, PARAMS)
    # without -L the unit is chosen and recorded first, then created with -u (mdconfig prints nothing)
    assert "mdconfig -a -t swap -s 1024m -u 1" in host.commands
    create = host.commands.index("mdconfig -a -t swap -s 1024m -u 1")
    record = max(i for i, c in enumerate(host.commands[:create]) if c.startswith("umask 022; S=/var/run/"))
    assert host.commands[record + 1] == f"mdconfig -a -t swap -s 1024m -L {LABEL} -u 1"  # refused: no -L
    assert " md1 " in host.commands[record] and " swap 1073741824" in host.commands[record]
    assert host.leaked() == [] and host.state_file is None and result.cleanup.ok


# --------------------------------------------------------------------------- leftovers: whose they are


def _labelled_leftover(host: ScriptedHost, state: str | None, *, eli: bool = True) -> None:
    host.md["md1"] = Md("swap", "1024m", LABEL)
    if eli:
        host.eli.add("md1.eli")
    host.state_file = state


def test_stale_state_entry_for_an_unlabelled_md_is_dropped_never_destroyed() -> None:
    # a crashed run recorded md1; md1 is long gone and the admin's own swap md1 now has that unit
    for label in (None, "scratch"):
        host = ScriptedHost(preexisting={"md0": Md("malloc", "64m", None), "md1": Md("swap", "1024m", label)})
        host.state_file = "1732000000 md1\n"
        result = measure(host, PARAMS)  # not refused: md1 is not ours
        assert result.cleanup.ok and result.leftovers_removed == []
        assert not any(c.startswith("mdconfig -d -u 1") for c in host.commands)
        assert "md1" in host.md and host.md["md1"].label == label
        assert host.state_file is None  # the stale entry is gone from the file
        host.state_file = f"1732000000 md1 {_owner(_dead_pid())} swap 1073741824\n"
        report = cleanup_leftovers(host)
        assert report.removed == [] and report.ok, report.summary()
        assert "md1" in host.md and host.state_file is None
        assert not any(c.startswith("mdconfig -d -u 1") for c in host.commands)


def test_a_normal_run_removes_leftovers_of_a_crashed_run_and_says_so() -> None:
    host = ScriptedHost()
    _labelled_leftover(host, f"1732000000 md1 {_owner(_dead_pid())} swap 1073741824\n")
    result = measure(host, PARAMS)
    assert result.leftovers_removed == ["md1.eli", "md1"]
    assert any("removed md1.eli, md1 left by an interrupted bsdcrypt bench" in w for w in result.warnings)
    assert result.to_record()["leftovers_removed"] == ["md1.eli", "md1"]
    assert "geli detach md1.eli" in host.commands
    assert host.leaked() == [] and host.state_file is None and "md0" in host.md


def test_leftovers_of_a_running_bench_are_never_removed() -> None:
    import os

    alive = _owner(os.getppid())  # a process that certainly runs
    host = ScriptedHost()
    _labelled_leftover(host, f"1732000000 md1 {alive} swap 1073741824\n")
    with pytest.raises(BenchError) as info:
        measure(host, PARAMS)
    msg = str(info.value)
    assert info.value.step == ST_LEFTOVERS
    assert "still running" in msg and f"pid {os.getppid()}" in msg
    report = cleanup_leftovers(host)
    assert not report.ok and report.removed == []
    assert report.refused and report.refused[0][0] == "md1" and "still running" in report.summary()
    assert "md1" in host.md and "md1.eli" in host.eli
    assert not any(c.startswith(("mdconfig -d", "geli detach")) for c in host.commands)
    assert host.state_file == f"1732000000 md1 {alive} swap 1073741824\n"  # still names its owner


def test_leftovers_of_a_bench_run_from_another_machine_are_left_alone() -> None:
    host = ScriptedHost()
    _labelled_leftover(host, "1732000000 md1 4242@laptop.example.org swap 1073741824\n")
    with pytest.raises(BenchError) as info:
        measure(host, PARAMS)
    assert "laptop.example.org" in str(info.value) and "mdconfig -d -u 1 -o force" in str(info.value)
    report = cleanup_leftovers(host)
    assert not report.ok and [d for d, _ in report.refused] == ["md1"]
    assert "md1" in host.md


@pytest.mark.slow
@pytest.mark.parametrize("where", ["this machine", "another machine"])
@pytest.mark.parametrize("when", ["before the create", "after the create"])
def test_a_cleanup_between_recording_and_creating_never_takes_the_running_benchs_md(
    where: str, when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `bench --cleanup` that runs while a bench creates its md (from this machine or another)
    sees the unit owned by a live or unknown bench, never an unclaimed one: it leaves it, and the
    bench's entry, alone; the bench measures and cleans up as usual."""
    import bsdcrypt.bench.state as state_mod

    reports: list[CleanupReport] = []
    states: list[str] = []  # the state file once the md exists (and any racing cleanup is done)

    class RacingHost(ScriptedHost):
        def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
            create = command.startswith("mdconfig -a")
            if create and when == "before the create" and not reports:
                self._race()
            result = super().run(command, input=input, timeout=timeout)
            if create and when == "after the create" and not reports:
                self._race()
            if create:
                states.append(self.state_file or "")
            return result

        def _race(self) -> None:
            with monkeypatch.context() as m:
                if where == "another machine":
                    m.setattr(state_mod, "controller_name", lambda: "laptop.example.org")
                reports.append(cleanup_leftovers(self))

    host = RacingHost()
    result = measure(host, PARAMS)
    (report,) = reports
    assert report.removed == []
    assert f" md1 {state_mod.this_owner()} swap 1073741824 " in states[0]  # still claimed: no later cleanup takes it
    if when == "after the create":
        assert [d for d, _ in report.refused] == ["md1"]
        assert "unclaimed" not in report.summary() and "no entry" not in report.summary()
    plain = ScriptedHost()
    measure(plain, PARAMS)
    assert host.destroyed == plain.destroyed  # only by the bench itself, as in a run without the race
    assert result.cleanup.ok and host.leaked() == [] and host.state_file is None


def test_a_pending_unit_of_another_size_is_not_taken_for_ours() -> None:
    """Interrupted while creating its md, the bench finds that unit made by someone else meanwhile
    (another size): it is not ours, and is left alone."""
    idx = next(i for i, c in enumerate(HAPPY) if c.startswith("mdconfig -a"))

    class OtherHost(ScriptedHost):
        def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
            if command.startswith("mdconfig -a"):
                self.md["md1"] = Md("swap", "512m", LABEL)  # another bench's, made in the meantime
                self.commands.append(command)
                raise KeyboardInterrupt
            return super().run(command, input=input, timeout=timeout)

    host = OtherHost()
    with pytest.raises(BenchInterrupted):
        measure(host, PARAMS)
    assert HAPPY[idx].startswith("mdconfig -a") and "md1" in host.md and host.destroyed == []
    assert not any(c.startswith("mdconfig -d") for c in host.commands)


def test_unclaimed_labelled_md_refuses_a_run_and_cleanup_removes_it() -> None:
    host = ScriptedHost()
    _labelled_leftover(host, None, eli=False)
    with pytest.raises(BenchError, match="bsdcrypt bench cleanup"):
        measure(host, PARAMS)
    assert "md1" in host.md
    report = cleanup_leftovers(host)
    assert report.removed == ["md1"] and report.ok


@pytest.mark.parametrize(
    ("md", "state", "kept"),
    [
        (Md("swap", "512m", None), "swap 1073741824", True),  # another size: not the md we recorded
        (Md("malloc", "1024m", None), "swap 1073741824", True),  # another type
        (Md("swap", "1024m", None), "swap 1073741824", False),  # ours, owner gone: removed
    ],
)
def test_without_labels_the_state_entry_must_match_type_and_size(md: Md, state: str, kept: bool) -> None:
    host = ScriptedHost(label_support=False)
    host.md["md1"] = md
    host.state_file = f"1732000000 md1 {_owner(_dead_pid())} {state}\n"
    report = cleanup_leftovers(host)
    assert report.ok
    assert ("md1" in host.md) == kept
    assert host.state_file is None  # a stale entry is dropped either way


def test_without_labels_an_entry_without_owner_is_not_trusted() -> None:
    host = ScriptedHost(label_support=False)
    host.md["md1"] = Md("swap", "1024m", None)
    host.state_file = "1732000000 md1\n"  # the first state format: no owner, no size
    with pytest.raises(BenchError, match="remove it by hand"):
        measure(host, PARAMS)
    report = cleanup_leftovers(host)
    assert not report.ok and report.removed == [] and "md1" in host.md


def test_state_entries_of_other_runs_survive_our_writes() -> None:
    import os

    other = f"1732000000 md1 {_owner(os.getppid())} swap 1073741824\n"
    host = ScriptedHost(preexisting={"md1": Md("swap", "1024m", LABEL)})
    host.state_file = other
    with pytest.raises(BenchError, match="still running"):
        measure(host, PARAMS)
    assert host.state_file == other


def _happy_nolabel_commands() -> list[str]:
    host = ScriptedHost(label_support=False)
    measure(host, PARAMS)
    return host.commands


HAPPY_NOLABEL = _happy_nolabel_commands()


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize(
    "index", range(len(HAPPY_NOLABEL)), ids=[f"{i}:{c[:40]}" for i, c in enumerate(HAPPY_NOLABEL)]
)
def test_without_labels_an_interrupt_at_each_step_leaks_nothing(index: int, after: bool) -> None:
    # in particular between creating the md and reading mdconfig's answer
    host = ScriptedHost(label_support=False, interrupt_at=index, interrupt_after=after)
    with pytest.raises(BenchInterrupted) as info:
        measure(host, PARAMS)
    assert info.value.cleanup is not None and info.value.cleanup.ok, str(info.value)
    assert host.leaked() == [], host.commands[index:]
    assert host.state_file is None or "md1" not in host.state_file


def test_without_labels_a_unit_taken_meanwhile_is_skipped() -> None:
    class RacingHost(ScriptedHost):
        def _execute(self, kind: str, command: str) -> RunResult:
            if kind == "mdconfig-attach" and command.endswith("-u 1") and "md1" not in self.md:
                self.md["md1"] = Md("vnode", "64m", None)  # the admin was quicker
                self.preexisting["md1"] = self.md["md1"]
            return super()._execute(kind, command)

    host = RacingHost(label_support=False)
    result = measure(host, PARAMS)
    assert "mdconfig -a -t swap -s 1024m -u 2" in host.commands
    assert result.cleanup.ok and host.leaked() == [] and host.md["md1"].type == "vnode"


# --------------------------------------------------------------------------- the state file, second audit


def test_a_clock_step_never_makes_a_running_benchs_md_removable() -> None:
    """FreeBSD rewrites kern.boottime at every clock step (kern_tc.c tc_setclock): an entry written
    before the step has another boot time, and the labelled md it claims is still a live bench's."""
    import os

    alive = _owner(os.getppid())
    before_step = f"1731996400 md1 {alive} swap 1073741824\n"  # kern.boottime was an hour earlier
    host = ScriptedHost()
    _labelled_leftover(host, before_step)
    report = cleanup_leftovers(host)
    assert not report.ok and report.removed == [] and [d for d, _ in report.refused] == ["md1"]
    assert "still running" in report.summary()
    assert "md1" in host.md and "md1.eli" in host.eli and host.state_file == before_step
    assert not any(c.startswith(("mdconfig -d", "geli detach")) for c in host.commands)
    with pytest.raises(BenchError, match="still running"):
        measure(host, PARAMS)
    assert host.state_file == before_step


def test_without_labels_another_boot_time_is_refused_and_kept() -> None:
    host = ScriptedHost(label_support=False)
    host.md["md1"] = Md("swap", "1024m", None)
    line = f"1731996400 md1 {_owner(_dead_pid())} swap 1073741824\n"
    host.state_file = line
    report = cleanup_leftovers(host)
    assert not report.ok and report.removed == [] and "md1" in host.md
    assert "a reboot, or a clock step" in report.summary() and "delete its line" in report.summary()
    assert host.state_file == line  # uncertain: neither acted on nor forgotten
    with pytest.raises(BenchError, match="clock step"):
        measure(host, PARAMS)


def test_a_run_never_drops_an_entry_another_run_wrote_meanwhile() -> None:
    """Our state updates change our own lines in place; another bench's entry written after our
    preflight read the file stays (before, our rewrite put back the file as we had read it)."""
    other = "1732000000 md5 1@elsewhere.example swap 1073741824 0123456789abcdef fedcba9876543210\n"

    class Busy(ScriptedHost):
        def _execute(self, kind: str, command: str) -> RunResult:
            if kind == "fio" and other not in (self.state_file or ""):
                self.state_file = (self.state_file or "") + other  # another controller's bench starts
                self.md["md5"] = Md("swap", "1024m", LABEL)
                self.preexisting["md5"] = self.md["md5"]
            return super()._execute(kind, command)

    host = Busy()
    result = measure(host, PARAMS)
    assert result.cleanup.ok and host.state_file == other and "md5" in host.md


@pytest.mark.parametrize("garbage", ["\u00b9 md0", "\u0663 md1 1@h swap 1", "1 md1 %s@h swap 1", "junk", "1 md1 1@h swap 1 xyz -"])
def test_garbage_lines_in_the_state_file_never_block_and_are_said_once(garbage: str) -> None:
    host = ScriptedHost()
    host.state_file = f"{garbage}\n{garbage}\n"
    result = measure(host, PARAMS)
    notes = [w for w in result.warnings if "/var/run/bsdcrypt-bench.units" in w]
    assert len(notes) == 1 and "ignored 2 line(s)" in notes[0], result.warnings
    assert host.leaked() == [] and host.state_file == f"{garbage}\n{garbage}\n"  # left as they are
    report = cleanup_leftovers(host)
    assert report.ok


def test_state_lines_are_data_never_a_printf_format(monkeypatch: pytest.MonkeyPatch) -> None:
    from bsdcrypt.bench.state import StateEntry, parse_state

    monkeypatch.setattr("socket.gethostname", lambda: "ws%s%n\\n1")
    seen: list[str] = []

    class Watch(ScriptedHost):
        def _state_write(self, command: str) -> RunResult:
            res = super()._state_write(command)
            seen.append(self.state_file or "")
            return res

    host = Watch(label_support=False)
    measure(host, PARAMS)
    (line,) = [s for s in seen if s][:1]
    (entry,) = parse_state(line)
    assert entry.owner is not None and entry.owner.endswith("@ws_s_n_n1") and entry.size == 1073741824
    assert entry.run is not None and entry.controller is not None
    with pytest.raises(ValueError, match="malformed"):
        StateEntry(1, "md1", "1@h%s", "swap", 1).line()
    with pytest.raises(ValueError, match="malformed"):
        StateEntry(1, "md1 x", "1@h", "swap", 1).line()


def test_a_bench_of_another_controller_with_the_same_name_is_never_judged_dead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bsdcrypt.bench import state

    mine = state.controller_id()
    dead = _dead_pid()
    for controller, removed in (("fedcba9876543210", False), ("-", False), (mine, True)):
        host = ScriptedHost()
        _labelled_leftover(host, f"1732000000 md1 {_owner(dead)} swap 1073741824 0123456789abcdef {controller}\n")
        report = cleanup_leftovers(host)
        assert ("md1" not in host.md) is removed, report.summary()
        if not removed:
            assert "another machine of that name" in report.summary() and "md1" in host.md


def test_controller_id_without_a_machine_id_is_kept_per_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bsdcrypt.bench import state

    monkeypatch.setattr(state, "MACHINE_ID_FILES", (str(tmp_path / "none"),))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    state.controller_id.cache_clear()
    try:
        first = state.controller_id()
        state.controller_id.cache_clear()
        assert first == state.controller_id() and len(first) == 16
        assert (tmp_path / "state" / "bsdcrypt" / "controller-id").read_text().strip() == first
    finally:
        state.controller_id.cache_clear()
