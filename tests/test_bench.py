"""bsdcrypt bench against a scripted FreeBSD host: sequence, fault injection, cleanup."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bsdcrypt import bench
from bsdcrypt.bench import (
    LABEL,
    BenchError,
    BenchInterrupted,
    BenchParams,
    HostFacts,
    compare,
    measure,
)
from bsdcrypt.bench.state import controller_name
from bsdcrypt.hosts.base import RunResult
from bsdcrypt.parsers.mdconfig import parse_mdconfig_list
from bsdcrypt.parsers.swapinfo import parse_swapinfo_avail_kib
from bsdcrypt.parsers.sysctl import parse_boottime

FIO_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fio"


def _fixture_body(name: str) -> str:
    text = (FIO_FIXTURES / name).read_text(encoding="utf-8")
    return text.split("# ---\n", 1)[1]


# The fio JSON our jobs produce (real fio-3.33 captures of the same job shapes).
FIO_JSON = {
    "write": _fixture_body("fio-3.33-debian-posixaio-group-reporting.txt"),
    "read": _fixture_body("fio-3.33-debian-posixaio-read-group-reporting.txt"),
}

SYSCTL_OUT = """kern.hostname: bench1.example.org
kern.osrelease: 14.1-RELEASE-p5
hw.machine_arch: amd64
hw.model: Intel(R) Xeon(R) CPU E5-2630 v4 @ 2.20GHz
hw.ncpu: 20
hw.physmem: 68623294464
hw.pagesize: 4096
vm.stats.vm.v_free_count: 4000000
vm.stats.vm.v_inactive_count: 500000
kern.boottime: { sec = 1732000000, usec = 415202 } Tue Nov 19 07:06:40 2024
"""

SWAPINFO_OUT = """Device          1K-blocks     Used    Avail Capacity
/dev/ada0p3       4194304        0  4194304     0%
"""

GELI_LIST = """Geom name: {eli}
State: ACTIVE
EncryptionAlgorithm: AES-XTS
KeyLength: {keylen}
Crypto: {crypto}
Version: 7
Flags: ONETIME, W-DETACH, W-OPEN, AUTORESIZE
KeysAllocated: 1
KeysTotal: 1
Providers:
1. Name: {eli}
   Mediasize: 1073741824 (1.0G)
   Sectorsize: 4096
   Mode: r0w0e0
Consumers:
1. Name: {md}
   Mediasize: 1073741824 (1.0G)
   Sectorsize: 512
   Mode: r1w1e1

"""

# Failure outputs of each command, from the FreeBSD sources (mdconfig.c err()/errx(),
# g_eli_ctl.c gctl_error() as printed by geom(8), geom.c std_list() errx() for a missing
# instance, fio's open error line). {dev} is the device the failing command names.
FAILURES: dict[str, tuple[int, str]] = {
    "id": (127, "sh: id: not found\n"),
    "fio-version": (127, "sh: fio: not found\n"),
    "geli-check": (1, ""),
    "sysctl": (1, "sysctl: unknown oid 'vm.stats.vm.v_inactive_count'\n"),
    "swapinfo": (1, "swapinfo: kvm_getswapinfo failed\n"),
    "mdconfig-list": (1, "mdconfig: open(/dev/mdctl): Permission denied\n"),
    "mdconfig-attach": (1, "mdconfig: ioctl(/dev/mdctl): Cannot allocate memory\n"),
    "mdconfig-detach": (1, "mdconfig: ioctl(/dev/mdctl): Device busy\n"),
    "geli-onetime": (1, "geli: Invalid sector size.\n"),
    "geli-list": (1, "geli: Class 'ELI' does not have an instance named '{dev}'.\n"),
    "geli-detach": (1, "geli: Cannot destroy device {dev} (error=16).\n"),
    "fio": (
        1,
        "fio: pid=4242, err=1/file:filesetup.c:805, func=open(/dev/{dev}), error=Operation not permitted\n",
    ),
    "state-read": (1, "cat: /var/run/bsdcrypt-bench.units: No such file or directory\n"),
    "state-write": (2, "sh: cannot create /var/run/bsdcrypt-bench.units: Read-only file system\n"),
    "test": (1, ""),
}


@dataclass
class Md:
    type: str
    size: str  # as given to mdconfig -s: "1024m"
    label: str | None


def _bytes(size: str) -> int:
    return int(size[:-1]) << {"k": 10, "m": 20, "g": 30}[size[-1].lower()]


def humanize(n: int) -> str:
    """libutil humanize_number(buf, 6, n, "", HN_AUTOSCALE, HN_B | HN_NOSPACE | HN_DECIMAL), as
    mdconfig.c md_prthumanval() calls it (lib/libutil/humanize_number.c, 1024-based)."""
    prefixes = ["B", "K", "M", "G", "T", "P", "E"]
    divisor, deccut = 1024, 973
    maxv = 10 ** (6 - 2)  # len 6 - baselen 2 (one digit, one prefix letter)
    i, remainder = 0, 0
    while (n >= maxv or (n == maxv - 1 and (remainder >= deccut or remainder >= divisor // 2))) and i < 7:
        remainder = n % divisor
        n //= divisor
        i += 1
    if ((n == 9 and remainder < deccut) or n < 9) and i > 0:
        s1 = n + (remainder * 10 + divisor // 2) // divisor // 10
        s2 = ((remainder * 10 + divisor // 2) // divisor) % 10
        return f"{s1}.{s2}{prefixes[i]}"
    return f"{n + (remainder + divisor // 2) // divisor}{prefixes[i]}"


@dataclass
class ScriptedHost:
    """A FreeBSD host in miniature: answers bench's commands like FreeBSD would and keeps
    md(4)/GELI state, so a test can see exactly what was created and destroyed."""

    can_exec = True
    uid: int = 0
    has_fio: bool = True
    crypto: str = "accelerated software"
    label_support: bool = True
    preexisting: dict[str, Md] = field(default_factory=lambda: {"md0": Md("malloc", "64m", None)})
    fail_at: int | None = None  # make command number N (0-based) fail
    interrupt_at: int | None = None  # raise KeyboardInterrupt at command number N
    interrupt_after: bool = False  # ... after the command took effect instead of before
    fio_holds_open: bool = False  # an interrupted fio keeps the device open (needs -f / force)
    stuck: set[str] = field(default_factory=set)  # devices that refuse to go away, even forced
    onetime_silently_fails: bool = False  # geli onetime exits 0 but no provider appears
    name: str = "scripted"
    spec: str = "scripted"

    commands: list[str] = field(default_factory=list)
    md: dict[str, Md] = field(default_factory=dict)
    eli: set[str] = field(default_factory=set)
    eli_keylen: dict[str, int] = field(default_factory=dict)
    open_devs: set[str] = field(default_factory=set)
    created: list[str] = field(default_factory=list)
    destroyed: list[str] = field(default_factory=list)
    state_file: str | None = None

    def __post_init__(self) -> None:
        self.md = dict(self.preexisting)

    # the devices bench created and did not destroy
    def leaked(self) -> list[str]:
        return sorted(set(self.md) - set(self.preexisting)) + sorted(self.eli)

    def close(self) -> None:
        return None

    @staticmethod
    def kind(command: str) -> str:
        c = command.removeprefix("exec ")
        if c.startswith("OPENSSL_ia32cap=") or c.startswith("openssl "):
            return "openssl"
        for prefix, kind in (
            ("id -u", "id"),
            ("fio --version", "fio-version"),
            ("fio ", "fio"),
            ("command -v geli", "geli-check"),
            ("sysctl", "sysctl"),
            ("swapinfo", "swapinfo"),
            ("mdconfig -l", "mdconfig-list"),
            ("mdconfig -a", "mdconfig-attach"),
            ("mdconfig -d", "mdconfig-detach"),
            ("geli onetime", "geli-onetime"),
            ("geli list", "geli-list"),
            ("geli detach", "geli-detach"),
            ("cat /var/run/bsdcrypt-bench.units", "state-read"),
            ("umask 022; S=/var/run/bsdcrypt-bench.units;", "state-write"),
            ("test -c", "test"),
        ):
            if c.startswith(prefix):
                return kind
        raise AssertionError(f"ScriptedHost: unexpected command {command!r}")

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        n = len(self.commands)
        self.commands.append(command)
        kind = self.kind(command)
        if self.interrupt_at == n and not self.interrupt_after:
            if kind == "fio" and self.fio_holds_open:
                self.open_devs.add(shlex.split(command)[3].split("=", 1)[1].removeprefix("/dev/"))
            raise KeyboardInterrupt
        if self.fail_at == n:
            rc, err = FAILURES[kind]
            return RunResult(rc, b"", err.format(dev=self.device_of(kind, command)).encode())
        result = self._execute(kind, command)
        if self.interrupt_at == n and self.interrupt_after:
            raise KeyboardInterrupt
        return result

    def _state_write(self, command: str) -> RunResult:
        """The real shell update of the state file, run here on a copy of it in a temporary folder."""
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory(prefix="bsdcrypt-state-") as d:
            path = Path(d) / "bsdcrypt-bench.units"
            if self.state_file is not None:
                path.write_text(self.state_file)
            proc = subprocess.run(
                ["/bin/sh", "-c", command.replace("/var/run/bsdcrypt-bench.units", str(path))],
                capture_output=True, check=False, timeout=60,
            )
            self.state_file = path.read_text() if path.exists() else None
            leftover = sorted(p.name for p in Path(d).iterdir() if p.name not in (path.name, path.name + ".lock"))
            assert not leftover, f"the state update left {leftover}"
        return RunResult(proc.returncode, proc.stdout, proc.stderr)

    @staticmethod
    def device_of(kind: str, command: str) -> str:
        """The device a command names (for failure messages that quote it)."""
        argv = shlex.split(command.removeprefix("exec "))
        if kind == "fio":
            return next(a for a in argv if a.startswith("--filename=")).split("=", 1)[1].removeprefix("/dev/")
        if kind in ("geli-list", "geli-detach", "geli-onetime"):
            return argv[-1]
        return ""

    def _ok(self, out: str = "") -> RunResult:
        return RunResult(0, out.encode(), b"")

    def _err(self, rc: int, err: str) -> RunResult:
        return RunResult(rc, b"", err.encode())

    def _execute(self, kind: str, command: str) -> RunResult:
        argv = shlex.split(command.removeprefix("exec "))
        if kind == "id":
            return self._ok(f"{self.uid}\n")
        if kind == "fio-version":
            return self._ok("fio-3.36\n") if self.has_fio else self._err(127, "sh: fio: not found\n")
        if kind == "geli-check":
            return self._ok("/sbin/geli\n")
        if kind == "sysctl":
            return self._ok(SYSCTL_OUT)
        if kind == "swapinfo":
            return self._ok(SWAPINFO_OUT)
        if kind == "mdconfig-list":
            lines = []
            for unit in sorted(self.md, key=lambda u: int(u[2:])):
                m = self.md[unit]
                size = humanize(_bytes(m.size))
                if self.label_support:
                    lines.append(f"{unit}\t{m.type}\t{size:>6}\t-\t{m.label or '-'}\tcompress\n")
                else:
                    lines.append(f"{unit}\t{m.type}\t{size:>6}\n")
            return self._ok("".join(lines))
        if kind == "mdconfig-attach":
            if "-L" in argv and not self.label_support:
                return self._err(1, "mdconfig: illegal option -- L\nusage: mdconfig -a -t type [-n] ...\n")
            if "-u" in argv:  # explicit unit: EBUSY if it exists (md.c mdnew), prints nothing
                unit = "md" + argv[argv.index("-u") + 1]
                if unit in self.md:
                    return self._err(1, "mdconfig: ioctl(/dev/mdctl): Device busy\n")
            else:
                unit = next(f"md{i}" for i in range(100) if f"md{i}" not in self.md)
            label = argv[argv.index("-L") + 1] if "-L" in argv else None
            self.md[unit] = Md(argv[argv.index("-t") + 1], argv[argv.index("-s") + 1], label)
            self.created.append(unit)
            return self._ok("" if "-u" in argv else f"{unit}\n")
        if kind == "mdconfig-detach":
            unit = "md" + argv[argv.index("-u") + 1]
            if unit not in self.md:
                return self._err(1, "mdconfig: ioctl(/dev/mdctl): No such file or directory\n")
            force = "force" in argv
            if unit in self.stuck or (not force and (f"{unit}.eli" in self.eli or unit in self.open_devs)):
                return self._err(1, "mdconfig: ioctl(/dev/mdctl): Device busy\n")
            del self.md[unit]
            self.eli.discard(f"{unit}.eli")  # a forced md destroy takes the GELI layer with it
            self.destroyed.append(unit)
            return self._ok()
        if kind == "geli-onetime":
            md = argv[-1]
            if md not in self.md or f"{md}.eli" in self.eli:
                return self._err(1, f"geli: Provider {md} is invalid.\n")
            if self.onetime_silently_fails:
                return self._ok()
            self.eli.add(f"{md}.eli")
            self.eli_keylen[f"{md}.eli"] = int(argv[argv.index("-l") + 1]) if "-l" in argv else 128
            self.created.append(f"{md}.eli")
            return self._ok()  # geli onetime prints nothing on success
        if kind == "geli-list":
            eli = argv[-1]
            if eli not in self.eli:  # sbin/geom/core/geom.c std_list(): errx(EXIT_FAILURE, ...)
                return self._err(1, f"geli: Class 'ELI' does not have an instance named '{eli}'.\n")
            keylen = self.eli_keylen.get(eli, 128)
            return self._ok(GELI_LIST.format(eli=eli, md=eli[:-4], keylen=keylen, crypto=self.crypto))
        if kind == "geli-detach":
            eli = argv[-1]
            if eli not in self.eli:
                return self._err(1, f"geli: No such device: {eli}.\n")
            if eli in self.stuck or (eli in self.open_devs and "-f" not in argv):
                return self._err(1, f"geli: Cannot destroy device {eli} (error=16).\n")
            self.eli.discard(eli)
            self.open_devs.discard(eli)
            self.destroyed.append(eli)
            return self._ok()
        if kind == "fio":
            target = (
                next(a for a in argv if a.startswith("--filename=")).split("=", 1)[1].removeprefix("/dev/")
            )
            if target not in self.md and target not in self.eli:
                return self._err(
                    1,
                    f"fio: pid=4242, err=2/file:filesetup.c:805, func=open({target}), "
                    "error=No such file or directory\n",
                )
            return self._ok(FIO_JSON[next(a for a in argv if a.startswith("--rw=")).split("=", 1)[1]])
        if kind == "state-read":
            if self.state_file is None:
                return self._err(1, "cat: /var/run/bsdcrypt-bench.units: No such file or directory\n")
            return self._ok(self.state_file)
        if kind == "state-write":
            return self._state_write(command)
        if kind == "test":
            dev = argv[-1].removeprefix("/dev/")
            return self._ok() if dev in self.eli or dev in self.md else self._err(1, "")
        raise AssertionError(kind)


PARAMS = BenchParams(size_mib=1024, runtime_s=10, repeat=1)


@pytest.fixture(autouse=True)
def _no_retry_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bsdcrypt.bench.session.RETRY_DELAY_S", 0.0)  # where cleanup reads it


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


def _happy_commands() -> list[str]:
    host = ScriptedHost()
    measure(host, PARAMS)
    return host.commands


HAPPY = _happy_commands()

# which step a failing command must be reported as (mdconfig -l runs in two steps)
STEP_OF_KIND = {
    "id": {bench.ST_ROOT},
    "fio-version": {bench.ST_FIO},
    "geli-check": {bench.ST_GELI},
    "mdconfig-list": {bench.ST_LEFTOVERS, bench.ST_MDLIST},
    "mdconfig-attach": {bench.ST_CREATE},
    "mdconfig-detach": {bench.ST_DESTROY},
    "geli-onetime": {bench.ST_ONETIME},
    "geli-list": {bench.ST_GELI_LIST},
    "geli-detach": {bench.ST_DETACH},
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
    assert "bsdcrypt bench --cleanup" in msg
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


def test_leftovers_are_detected_and_cleanup_removes_only_ours() -> None:
    # a crashed run left md1 (labelled) with md1.eli on it; md0 and md2 are someone else's
    host = ScriptedHost(preexisting={"md0": Md("malloc", "64m", None), "md2": Md("swap", "512m", "scratch")})
    host.md["md1"] = Md("swap", "1024m", LABEL)
    host.eli.add("md1.eli")
    with pytest.raises(BenchError) as info:
        measure(host, PARAMS)
    assert info.value.step == bench.ST_LEFTOVERS
    assert "md1" in str(info.value) and "--cleanup" in str(info.value)
    assert "md1" in host.md  # not touched without --cleanup
    report = bench.cleanup_leftovers(host)
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
    report = bench.cleanup_leftovers(host)
    assert report.removed == ["md1"]
    # a state file from an earlier boot is ignored: that md1 is not ours
    host2 = ScriptedHost(label_support=False)
    host2.md["md1"] = Md("swap", "1024m", None)
    host2.state_file = f"1600000000 md1 {_owner(_dead_pid())} swap 1073741824\n"
    assert bench.cleanup_leftovers(host2).removed == []
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
    from bsdcrypt.bench.session import Devices

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


def test_compare_and_compiled_in_case() -> None:
    before = measure(ScriptedHost(crypto="software"), PARAMS)
    after = measure(ScriptedHost(crypto="accelerated software"), PARAMS)
    g = before.get("geli", "write")
    assert g is not None
    g.samples[0] = bench.Sample(g.samples[0].bw_bytes / 5, 1.0, 10000)
    sp = compare(before, after)
    assert sp.ratio["write"] == pytest.approx(5.0)
    assert "software -> accelerated software" in sp.note
    after.host.driver_compiled_in = True  # the reason comes from the facts when not given
    none = compare(None, after)
    assert none.ratio["write"] is None and "cannot be unloaded" in none.note
    assert none.ceiling_mib_s["write"] is not None
    # the reason given wins: never "compiled in" when the "before" failed or the driver was loaded
    failed = compare(None, after, "the 'before' measurement failed at step 'preflight: fio'")
    assert "failed at step 'preflight: fio'" in failed.note and "compiled" not in failed.note
    assert failed.no_before == "the 'before' measurement failed at step 'preflight: fio'"
    after.host.driver_compiled_in, after.host.driver_state = False, "loaded"
    assert "already loaded" in compare(None, after).note
    after.host.driver_state = "no-device"
    assert "compiled" not in compare(None, after).note


def test_userland_advice() -> None:
    fast_aes = [
        bench.CipherSpeed("aes-128-gcm", 3.7e9, 1.6e8),
        bench.CipherSpeed("chacha20-poly1305", 2.3e9, 2.3e9),
    ]
    prefer, text = bench.userland_advice(fast_aes)
    assert prefer == "AES-GCM" and "AES-NI makes" in text
    no_aesni = [
        bench.CipherSpeed("aes-128-gcm", 1.6e8, 1.5e8),
        bench.CipherSpeed("chacha20-poly1305", 9.0e8, 9.0e8),
    ]
    prefer, text = bench.userland_advice(no_aesni)
    assert prefer == "ChaCha20-Poly1305" and "not using AES-NI" in text


def test_parsers_of_host_output() -> None:
    assert parse_swapinfo_avail_kib(SWAPINFO_OUT) == 4194304
    two = (
        SWAPINFO_OUT
        + "/dev/ada1p3       1048576     1024  1047552     0%\n"
        + "Total             5242880     1024  5241856     0%\n"
    )
    assert parse_swapinfo_avail_kib(two) == 4194304 + 1047552
    assert parse_swapinfo_avail_kib("Device          1K-blocks     Used    Avail Capacity\n") == 0
    assert parse_boottime("{ sec = 1732000000, usec = 415202 } Tue Nov 19") == 1732000000
    entries = parse_mdconfig_list(
        "md0\tmalloc\t   64M\t-\t-\tcompress\nmd1\tswap\t  1.0G\t-\tbsdcrypt-bench\t\n"
    )
    assert [(e.name, e.type, e.label) for e in entries] == [("md0", "malloc", None), ("md1", "swap", LABEL)]
    old = parse_mdconfig_list("md0\tswap\t  1.0G\n")
    assert old[0].label is None and old[0].type == "swap"
    assert [e.name for e in parse_mdconfig_list("md0 md3 \n")] == ["md0", "md3"]


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
        report = bench.cleanup_leftovers(host)
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
    assert info.value.step == bench.ST_LEFTOVERS
    assert "still running" in msg and f"pid {os.getppid()}" in msg
    report = bench.cleanup_leftovers(host)
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
    report = bench.cleanup_leftovers(host)
    assert not report.ok and [d for d, _ in report.refused] == ["md1"]
    assert "md1" in host.md


@pytest.mark.parametrize("where", ["this machine", "another machine"])
@pytest.mark.parametrize("when", ["before the create", "after the create"])
def test_a_cleanup_between_recording_and_creating_never_takes_the_running_benchs_md(
    where: str, when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `bench --cleanup` that runs while a bench creates its md (from this machine or another)
    sees the unit owned by a live or unknown bench, never an unclaimed one: it leaves it, and the
    bench's entry, alone; the bench measures and cleans up as usual."""
    import bsdcrypt.bench.state as state_mod

    reports: list[bench.CleanupReport] = []
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
                reports.append(bench.cleanup_leftovers(self))

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
    with pytest.raises(BenchError, match="bsdcrypt bench --cleanup"):
        measure(host, PARAMS)
    assert "md1" in host.md
    report = bench.cleanup_leftovers(host)
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
    report = bench.cleanup_leftovers(host)
    assert report.ok
    assert ("md1" in host.md) == kept
    assert host.state_file is None  # a stale entry is dropped either way


def test_without_labels_an_entry_without_owner_is_not_trusted() -> None:
    host = ScriptedHost(label_support=False)
    host.md["md1"] = Md("swap", "1024m", None)
    host.state_file = "1732000000 md1\n"  # the first state format: no owner, no size
    with pytest.raises(BenchError, match="remove it by hand"):
        measure(host, PARAMS)
    report = bench.cleanup_leftovers(host)
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
    assert [humanize(_bytes(s)) for s in ("64m", "512m", "1024m", "1000m", "2g")] == [
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
    assert info.value.step == bench.ST_GELI_LIST
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

    text = _fixture_body("fio-3.33-debian-posixaio-tmpfs-no-disk-util.txt")
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


# --------------------------------------------------------------------------- the state file, second audit


def test_a_clock_step_never_makes_a_running_benchs_md_removable() -> None:
    """FreeBSD rewrites kern.boottime at every clock step (kern_tc.c tc_setclock): an entry written
    before the step has another boot time, and the labelled md it claims is still a live bench's."""
    import os

    alive = _owner(os.getppid())
    before_step = f"1731996400 md1 {alive} swap 1073741824\n"  # kern.boottime was an hour earlier
    host = ScriptedHost()
    _labelled_leftover(host, before_step)
    report = bench.cleanup_leftovers(host)
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
    report = bench.cleanup_leftovers(host)
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
    report = bench.cleanup_leftovers(host)
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
        report = bench.cleanup_leftovers(host)
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
