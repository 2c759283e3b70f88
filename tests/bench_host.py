"""A scripted FreeBSD host for the bench: mdconfig, geli, fio, swapinfo, the state file, answered as
FreeBSD does (fixtures/fio for fio's JSON), with faults to inject."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from bsdcrypt.bench.model import BenchParams
from bsdcrypt.bench.run import measure
from bsdcrypt.hostapi import RunResult

FIO_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fio"
OPENSSL_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "openssl"


def fio_fixture(name: str) -> str:
    text = (FIO_FIXTURES / name).read_text(encoding="utf-8")
    return text.split("# ---\n", 1)[1]


# The fio JSON our jobs produce (real fio-3.33 captures of the same job shapes).
FIO_JSON = {
    "write": fio_fixture("fio-3.33-debian-posixaio-group-reporting.txt"),
    "read": fio_fixture("fio-3.33-debian-posixaio-read-group-reporting.txt"),
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
    "system": (127, "sh: uname: not found\n"),
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


def size_bytes(size: str) -> int:
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
        if c.startswith("( ulimit -c 0") and " speed " in c:  # bench/speed.py's openssl child
            return "openssl"
        for prefix, kind in (
            ("uname -s; command -v mdconfig", "system"),
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
        if kind == "system":  # uname(1) prints the kernel name; command -v the path (sh(1) builtin)
            return self._ok("FreeBSD\n/sbin/mdconfig\n")
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
                size = humanize(size_bytes(m.size))
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


# Real capture of bench/speed.py's command in CPU-time mode: stdout, then stderr's count line (0.13 s of CPU).
CPUTIME = (OPENSSL_FIXTURES / "debian-openssl3.0.19-cputime-seconds1-bytes16384-aes128gcm.txt").read_text()
CPUTIME_OUT, CPUTIME_ERR = CPUTIME.split("# ---\n", 1)[1].split("# --- stderr\n")
CPUTIME_FIGURE = 3119387.57e3  # its AES-128-GCM figure, bytes/s


def speed_answer(command: str, factor: float = 1.0, full_cpu: bool = True) -> RunResult:
    """What `openssl speed -evp CIPHER` answers: the capture, its row named for the command's cipher
    (OpenSSL prints them in capitals), its figure times `factor` (a busier or quieter moment), and
    with `full_cpu` the stderr line of a run that got its whole second of CPU."""
    import re

    cipher = command.split("-evp ", 1)[1].split()[0].upper()
    out = re.sub(r"(AES-128-GCM\s+)([0-9.]+)k", lambda m: f"{m.group(1)}{float(m.group(2)) * factor:.2f}k", CPUTIME_OUT)
    err = CPUTIME_ERR.replace("in 0.13s", "in 0.99s") if full_cpu else CPUTIME_ERR
    return RunResult(0, out.replace("AES-128-GCM", cipher).encode(), err.replace("AES-128-GCM", cipher).encode())


PARAMS = BenchParams(size_mib=1024, runtime_s=10, repeat=1)


def happy_commands() -> list[str]:
    host = ScriptedHost()
    measure(host, PARAMS)
    return host.commands
