"""`BenchSession`: runs the steps on one host, tracks the devices it created, cleans them up."""

from __future__ import annotations

import functools
import os
import re
import shlex
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from bsdcrypt.bench.model import (
    LABEL,
    MIB,
    ST_CREATE,
    ST_DESTROY,
    ST_DETACH,
    ST_FIO,
    ST_GELI,
    ST_GELI_LIST,
    ST_LEFTOVERS,
    ST_MDLIST,
    ST_MEMORY,
    ST_ONETIME,
    ST_ROOT,
    ST_STATE,
    ST_SWAP,
    ST_SYSCTL,
    STATE_FILE,
    BenchError,
    BenchInterrupted,
    BenchParams,
    CleanupReport,
    fio_args,
)
from bsdcrypt.bench.signals import signals_deferred
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.facts import GeliProvider
from bsdcrypt.host import Host, RunResult
from bsdcrypt.parsers import fio as fio_parser
from bsdcrypt.parsers.geli import parse_geli_list
from bsdcrypt.parsers.mdconfig import MD_NAME, MdEntry, parse_mdconfig_list
from bsdcrypt.parsers.swapinfo import parse_swapinfo_avail_kib
from bsdcrypt.parsers.sysctl import parse_boottime, parse_sysctl

RETRY_DELAY_S = 1.0  # between a plain and a forced detach/destroy in cleanup
CREATE_TRIES = 3  # explicit-unit creation (mdconfig without -L): a unit taken meanwhile is skipped

# The GELI class is there, or geom(8) can load geom_eli.ko from the kernel's module path
# (sbin/geom/core/geom.c std_load_available: kern.module_path split on ';').
GELI_CHECK = (
    "command -v geli && { kldstat -q -m g_eli || "
    "{ sysctl -n kern.module_path 2>/dev/null || echo /boot/kernel; } | tr ';' '\\n' | "
    'while read -r d; do test -e "$d/geom_eli.ko" && echo "$d/geom_eli.ko"; done | grep -q .; }'
)


def controller_name() -> str:
    """The machine running bsdcrypt, as written into the state file's owner field."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "localhost"


def this_owner() -> str:
    """`<pid>@<machine>` of this bsdcrypt process: who owns the md units it creates."""
    return f"{os.getpid()}@{controller_name()}"


def owner_status(owner: str) -> str:
    """"alive", "dead", or "elsewhere" (a bsdcrypt on another machine: cannot be checked from here).

    The owning process runs where bsdcrypt ran (this machine for --host local; the admin's machine
    over SSH), so the check is kill(pid, 0) on this machine, and only when the owner is this machine.
    Anything doubtful counts as alive: a wrong "alive" only refuses, a wrong "dead" would destroy.
    """
    pid_text, _, where = owner.partition("@")
    if where != controller_name():
        return "elsewhere"
    try:
        pid = int(pid_text)
    except ValueError:
        return "elsewhere"
    if pid <= 0:
        return "elsewhere"
    if pid == os.getpid():
        return "alive"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except (OSError, OverflowError):  # EPERM: exists under another user
        return "alive"
    return "alive"


_HUMAN = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([BKMGTPE]?)\s*$", re.I)


def parse_human_size(text: str) -> int | None:
    """mdconfig -l -v's length (libutil humanize_number, HN_AUTOSCALE|HN_DECIMAL, 1024-based):
    "1.0G", "512M", "64M" -> bytes (rounded as printed)."""
    m = _HUMAN.match(text)
    if not m:
        return None
    scale = "BKMGTPE".index(m.group(2).upper() or "B")
    return int(float(m.group(1)) * 1024**scale)


def _same_size(printed: int, recorded: int) -> bool:
    # humanize_number keeps 2-4 significant digits: "1.0G" stands for 0.95-1.05 GiB
    return abs(printed - recorded) <= 0.06 * recorded


@dataclass(frozen=True)
class MdRow:
    name: str
    type: str | None
    size: int | None  # bytes, as far as the humanized length tells
    label: str | None


def parse_md_rows(text: str) -> tuple[list[MdRow], bool]:
    """`mdconfig -l -v` -> rows, and whether this mdconfig prints the label column.

    sbin/mdconfig/mdconfig.c md_list(), tab-separated: `name type length [file]` before labels
    (2012); since -L: `name type length file|- label|- options`.
    """
    rows: list[MdRow] = []
    label_column = False
    for entry in parse_mdconfig_list(text):
        rows.append(MdRow(entry.name, entry.type, None, entry.label))
    sizes: dict[str, int | None] = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if MD_NAME.match(fields[0].strip()):
            if len(fields) >= 5:
                label_column = True
            sizes[fields[0].strip()] = parse_human_size(fields[2]) if len(fields) > 2 else None
    return [MdRow(r.name, r.type, sizes.get(r.name), r.label) for r in rows], label_column


@dataclass(frozen=True)
class StateEntry:
    """One line of the state file: `<boottime> <mdN> <pid>@<machine> <type> <bytes>`.

    Lines of the first format (`<boottime> <mdN>`) have no owner, type or size.
    """

    boottime: int
    md: str
    owner: str | None = None
    type: str | None = None
    size: int | None = None

    def line(self) -> str:
        size = "-" if self.size is None else str(self.size)
        return f"{self.boottime} {self.md} {self.owner or '-'} {self.type or '-'} {size}"


def parse_state(text: str) -> list[StateEntry]:
    entries: list[StateEntry] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) not in (2, 5) or not parts[0].isdigit() or not MD_NAME.match(parts[1]):
            continue
        if len(parts) == 2:
            entries.append(StateEntry(int(parts[0]), parts[1]))
            continue
        owner = parts[2] if re.fullmatch(r"[0-9]+@[A-Za-z0-9._-]+", parts[2]) else None
        size = int(parts[4]) if parts[4].isdigit() else None
        entries.append(StateEntry(int(parts[0]), parts[1], owner, None if parts[3] == "-" else parts[3], size))
    return entries


@dataclass(frozen=True)
class Leftover:
    """An md unit an earlier bench left, and whether it may be removed.

    status: "dead" (its owner, on this machine, no longer runs: certainly a crashed run's),
    "alive" (its bench still runs), "elsewhere" (owner on another machine: cannot be checked),
    "unclaimed" (labelled bsdcrypt-bench, but no state entry names an owner), "unverified"
    (no label column to confirm a state entry that names no owner).
    """

    md: str
    status: str
    owner: str | None
    why: str

    @property
    def certain(self) -> bool:
        return self.status == "dead"


def _by_hand(md: str) -> str:
    return f"`geli detach -f {md}.eli` (if it exists) and `mdconfig -d -u {md[2:]} -o force`"


def _owner_text(owner: str) -> str:
    pid, _, where = owner.partition("@")
    return f"pid {pid} on {where}"


def _first_line(res: RunResult) -> str:
    for blob in (res.stderr, res.stdout):
        text = blob.decode("utf-8", errors="replace").strip()
        if text:
            return text.splitlines()[-1] if len(text.splitlines()) > 3 else " ".join(text.split())
    return f"exit status {res.rc}"


class _Devices:
    """The md units and .eli providers this run created: the only devices it may name."""

    def __init__(self) -> None:
        self.before: set[str] = set()
        self.md: list[str] = []  # alive, created by this run (or adopted leftovers)
        self.eli: list[str] = []  # alive GELI providers on top of those

    def adopt_md(self, name: str) -> str:
        if not MD_NAME.match(name):
            raise BenchError(ST_CREATE, f"mdconfig printed {name!r}, which is not an md(4) unit name")
        if name in self.before:
            raise BenchError(ST_CREATE, f"mdconfig printed {name}, which existed before this run")
        self.md.append(name)
        return name

    def md_ok(self, name: str) -> str:
        if not MD_NAME.match(name) or name not in self.md:
            raise BenchError("device check", f"refusing to touch {name!r}: not an md unit this run created")
        return name

    def eli_ok(self, name: str) -> str:
        base = name[: -len(".eli")] if name.endswith(".eli") else ""
        if not base or base not in self.md:
            raise BenchError("device check", f"refusing to touch {name!r}: not a GELI provider on our md")
        return name


class BenchSession:
    """One bench on one host: runs steps, tracks devices, cleans up."""

    def __init__(
        self, host: Host, params: BenchParams, progress: Callable[[str], None] | None = None
    ) -> None:
        self.host = host
        self.params = params
        self.devices = _Devices()
        self.step: str | None = None
        self.progress = progress or (lambda _msg: None)
        self.boottime: int | None = None
        self.label_supported = True
        self.warnings: list[str] = []
        self.interrupted: str | None = None  # an interrupt arrived while cleanup ran
        self.owner = this_owner()
        self.others: list[StateEntry] = []  # state entries of other runs, kept when we rewrite the file
        self.pending: str | None = None  # explicit unit being created (mdconfig without -L)
        self.sizes: dict[str, int | None] = {}  # bytes of each md we track, for the state file
        self.leftovers_removed: list[str] = []
        self._state_ours: set[str] = set()  # our units the state file names, as last written

    # -- running commands
    def run(self, step: str, command: str, *, timeout: float | None = 120.0) -> RunResult:
        self.step = step
        try:
            return self.host.run(command, timeout=timeout)
        except BsdcryptError as exc:  # HostError: unreachable, timed out
            raise BenchError(step, str(exc)) from exc

    def must(self, step: str, command: str, *, timeout: float | None = 120.0) -> RunResult:
        res = self.run(step, command, timeout=timeout)
        if not res.ok:
            raise BenchError(step, f"`{command}` failed: {_first_line(res)}")
        return res

    # -- preflight
    def preflight(self) -> dict[str, str]:
        res = self.must(ST_ROOT, "id -u")
        if res.stdout.decode(errors="replace").strip() != "0":
            raise BenchError(ST_ROOT, "bench creates md(4) and GELI devices and must run as root")
        res = self.run(ST_FIO, "fio --version")
        if not res.ok:
            raise BenchError(ST_FIO, "fio is not installed (install it with `pkg install fio`)")
        fio_version = res.stdout.decode(errors="replace").strip() or "unknown"
        res = self.run(ST_GELI, GELI_CHECK)
        if not res.ok:
            raise BenchError(
                ST_GELI, "GELI is not available (no geli(8), or no g_eli class and no geom_eli.ko in kern.module_path)"
            )
        oids = (
            "kern.hostname kern.osrelease hw.machine_arch hw.model hw.ncpu hw.physmem hw.pagesize "
            "vm.stats.vm.v_free_count vm.stats.vm.v_inactive_count kern.boottime"
        )
        # sysctl exits 1 when one OID is unknown but prints the others.
        facts = parse_sysctl(self.run(ST_SYSCTL, f"sysctl {oids}").stdout.decode(errors="replace"))
        self.boottime = parse_boottime(facts.get("kern.boottime"))
        swap_res = self.run(ST_SWAP, "swapinfo -k")
        swap_kib = parse_swapinfo_avail_kib(swap_res.stdout.decode(errors="replace")) if swap_res.ok else 0
        self._check_memory(facts, swap_kib)
        facts["fio_version"] = fio_version
        return facts

    def _check_memory(self, facts: dict[str, str], swap_kib: int) -> None:
        try:
            page = int(facts.get("hw.pagesize", "4096"))
            free = int(facts["vm.stats.vm.v_free_count"])
            free += int(facts.get("vm.stats.vm.v_inactive_count", "0"))
        except (KeyError, ValueError):
            self.warnings.append("could not read free memory (vm.stats.vm.v_free_count); size not checked")
            return
        ram = free * page
        need = self.params.size_mib * MIB
        reserve = 256 * MIB
        self.step = ST_MEMORY
        if need + reserve > ram + swap_kib * 1024:
            raise BenchError(
                ST_MEMORY,
                f"an md of {self.params.size_mib} MiB needs that much memory; free RAM is "
                f"{ram // MIB} MiB and free swap {swap_kib // 1024} MiB: use a smaller --size",
            )
        if need + reserve > ram:
            self.warnings.append(
                f"--size {self.params.size_mib} MiB exceeds free RAM ({ram // MIB} MiB): the md will page "
                "to swap and the figures will measure swap I/O, not crypto"
            )

    # -- md bookkeeping
    def list_md(self, step: str = ST_MDLIST) -> list[MdEntry]:
        return parse_mdconfig_list(self.must(step, "mdconfig -l -v").stdout.decode(errors="replace"))

    def read_state(self) -> list[StateEntry]:
        """Every entry of the state file (any boot); [] when it is missing or unreadable."""
        res = self.run(ST_LEFTOVERS, f"cat {STATE_FILE}")
        if not res.ok:
            return []
        return parse_state(res.stdout.decode(errors="replace"))

    def write_state(self) -> None:
        """Rewrite the state file: other runs' entries that still hold, then ours."""
        if self.boottime is None:
            return  # cannot date our entries; leave others' alone (the label still marks ours)
        ours = [m for m in self.devices.md if m != self.pending]
        if self.pending is not None:
            ours.append(self.pending)
        mine = set(ours)
        lines = [e.line() for e in self.others if e.md not in mine]
        lines += [StateEntry(self.boottime, m, self.owner, "swap", self.sizes.get(m)).line() for m in ours]
        if lines:
            body = "".join(f"{line}\\n" for line in lines)
            cmd = f"umask 022; printf {shlex.quote(body)} > {STATE_FILE}"
        else:
            cmd = f"rm -f {STATE_FILE}"
        res = self.run(ST_STATE, cmd)
        if res.ok:
            self._state_ours = mine
        else:
            self.warnings.append(
                f"could not update {STATE_FILE}: {_first_line(res)} (a crash now leaves devices the next run "
                "cannot attribute)"
            )

    def find_leftovers(self) -> list[Leftover]:
        """md units an earlier bench left behind, each with whether it may be removed.

        With the label column, only units labelled bsdcrypt-bench count; the state file then
        only says who owned them. Without it (mdconfig before -L), a state entry counts when it
        is of this boot and the unit is still a swap md of the recorded size. Entries that no
        longer hold (other boot, unit gone, unit with another or no label, other type or size)
        are dropped from the file, and their units are never touched.
        """
        rows, label_column = parse_md_rows(self.must(ST_LEFTOVERS, "mdconfig -l -v").stdout.decode(errors="replace"))
        by_name = {r.name: r for r in rows}
        entries = self.read_state()
        claimed: dict[str, StateEntry] = {}
        kept: list[StateEntry] = []
        stale = False
        for e in entries:
            row = by_name.get(e.md)
            if self.boottime is None:
                kept.append(e)  # cannot tell this boot from another: keep, trust nothing
                continue
            ok = e.boottime == self.boottime and row is not None
            if ok and row is not None:
                if label_column:
                    ok = row.label == LABEL
                else:
                    ok = row.type in (None, "swap") and e.type in (None, "swap")
                    if e.size is not None and row.size is not None:
                        ok = ok and _same_size(row.size, e.size)
            if ok:
                claimed[e.md] = e
                kept.append(e)
            else:
                stale = True
        self.others = kept
        candidates = set(claimed) if self.boottime is not None else set()
        if label_column:
            candidates |= {r.name for r in rows if r.label == LABEL}
        leftovers = [self._classify(md, claimed.get(md), label_column) for md in candidates]
        if stale:
            self.write_state()
        return sorted(leftovers, key=lambda lo: int(lo.md[2:]))

    def _classify(self, md: str, entry: StateEntry | None, label_column: bool) -> Leftover:
        if entry is None or entry.owner is None:
            if label_column:
                return Leftover(
                    md, "unclaimed", None,
                    f"{md} is labelled {LABEL} but no entry in {STATE_FILE} names the bench that made it (an "
                    "older bsdcrypt, or a run killed right after creating it); remove it with "
                    "`bsdcrypt bench --cleanup`",
                )
            return Leftover(
                md, "unverified", None,
                f"{md} is listed in {STATE_FILE} without an owner, and this mdconfig has no labels to confirm "
                f"it is a bench md; if no bsdcrypt bench is running, remove it by hand: {_by_hand(md)}",
            )
        who = _owner_text(entry.owner)
        status = owner_status(entry.owner)
        if status == "dead":
            return Leftover(md, status, entry.owner, f"{md} was left by bsdcrypt {who}, which is no longer running")
        if status == "alive":
            return Leftover(
                md, status, entry.owner,
                f"{md} belongs to a bsdcrypt bench that is still running ({who}); wait for it to finish (two "
                "benches at once would measure each other)",
            )
        return Leftover(
            md, status, entry.owner,
            f"{md} belongs to a bsdcrypt bench started from {who.split(' on ', 1)[1]} ({who}), which cannot be "
            f"checked from here; run `bsdcrypt bench --cleanup` there, or if it is no longer running, remove it "
            f"by hand: {_by_hand(md)}",
        )

    def adopt_leftover(self, leftover: Leftover) -> None:
        """Take a leftover over (with its .eli, if any) so that cleanup() removes it."""
        md = leftover.md
        if not MD_NAME.match(md) or md in self.devices.md:
            return
        self.devices.md.append(md)
        self.others = [e for e in self.others if e.md != md]
        if self.run(ST_LEFTOVERS, f"test -c /dev/{md}.eli").ok:
            self.devices.eli.append(f"{md}.eli")

    # -- device lifecycle
    def create_md(self) -> str:
        size = f"{self.params.size_mib}m"
        listed = self.list_md()
        self.devices.before = {e.name for e in listed}
        base = f"mdconfig -a -t swap -s {size}"
        if self.label_supported:
            res = self.run(ST_CREATE, f"{base} -L {LABEL}")
            err = res.stderr.decode(errors="replace")
            if not res.ok and ("illegal option" in err or "usage:" in err):
                self.label_supported = False  # mdconfig before -L: rely on the state file
            else:
                if not res.ok:
                    raise BenchError(ST_CREATE, f"`{base}` failed: {_first_line(res)}")
                name = res.stdout.decode(errors="replace").strip()
                md = self.devices.adopt_md(name)
                self.sizes[md] = self.params.size_mib * MIB
                self.write_state()
                self.progress(f"created {md} ({size}, swap-backed)")
                return md
        md = self._create_unit(base)
        self.progress(f"created {md} ({size}, swap-backed)")
        return md

    def _create_unit(self, base: str) -> str:
        """mdconfig without -L: pick the unit, record it, then create it (`-u N`), so that an
        interrupt between creating it and reading mdconfig's answer cannot leak an md that
        nothing could recognise later."""
        taken = set(self.devices.before)
        for _ in range(CREATE_TRIES):
            unit = next(n for n in range(1 << 20) if f"md{n}" not in taken)
            name = f"md{unit}"
            self.pending = name
            self.sizes[name] = self.params.size_mib * MIB
            self.write_state()
            res = self.run(ST_CREATE, f"{base} -u {unit}")
            if res.ok:
                self.pending = None
                return self.devices.adopt_md(name)
            self.pending = None
            self.sizes.pop(name, None)
            err = res.stderr.decode(errors="replace")
            if "Device busy" not in err and "File exists" not in err:
                self.write_state()
                raise BenchError(ST_CREATE, f"`{base} -u {unit}` failed: {_first_line(res)}")
            taken.add(name)  # created by someone else since the list: try the next one
        self.write_state()
        raise BenchError(ST_CREATE, f"`{base}` failed: {CREATE_TRIES} free units were taken meanwhile")

    def attach_geli(self, md: str) -> tuple[str, GeliProvider]:
        md = self.devices.md_ok(md)
        p = self.params
        self.must(ST_ONETIME, f"geli onetime -e {shlex.quote(p.ealgo)} -l {p.keylen} -s {p.sectorsize} {md}")
        eli = f"{md}.eli"
        self.devices.eli.append(eli)
        res = self.must(ST_GELI_LIST, f"geli list {self.devices.eli_ok(eli)}")
        info = next(iter(parse_geli_list(res.stdout.decode(errors="replace"))), GeliProvider(eli))
        self.progress(f"attached {eli}: {info.encryption} {info.key_length}, Crypto: {info.crypto}")
        return eli, info

    def detach_geli(self, eli: str, force: bool = False) -> None:
        eli = self.devices.eli_ok(eli)
        self.must(ST_DETACH, f"geli detach {'-f ' if force else ''}{eli}")
        self.devices.eli.remove(eli)

    def destroy_md(self, md: str, force: bool = False) -> None:
        md = self.devices.md_ok(md)
        self.must(ST_DESTROY, f"mdconfig -d -u {md[2:]}{' -o force' if force else ''}")
        self.devices.md.remove(md)
        self.sizes.pop(md, None)
        self.write_state()

    def run_fio(self, device: str, direction: str, numjobs: int) -> fio_parser.FioDirection:
        step = f"fio {direction} on {device}"
        if device.endswith(".eli"):
            self.devices.eli_ok(device)
        else:
            self.devices.md_ok(device)
        argv = fio_args(self.params, f"/dev/{device}", direction, numjobs)
        # exec: no sh left between us and fio. A Ctrl-C at a local terminal reaches fio too (same
        # process group); a dropped SSH exec without a PTY does not: fio runs to its end, and cleanup's
        # forced detach/destroy takes the devices from under it.
        res = self.run(step, "exec " + shlex.join(argv), timeout=self.params.runtime_s + 180.0)
        out = res.stdout.decode("utf-8", errors="replace")
        try:
            parsed = fio_parser.parse(out)
        except fio_parser.FioParseError as exc:
            why = _first_line(res) if not res.ok else str(exc)
            raise BenchError(step, f"fio failed: {why}") from exc
        if parsed.errors:
            raise BenchError(step, f"fio reported job errors {parsed.errors}: {_first_line(res)}")
        d = parsed.direction(direction)
        if d is None or d.bw_bytes <= 0:
            raise BenchError(step, "fio moved no data")
        self.progress(f"{direction} on {device}: {d.mib_per_s:.0f} MiB/s")
        return d

    # -- cleanup
    def cleanup(self) -> CleanupReport:
        """Detach our GELI providers and destroy our md units; retry with force; verify."""
        report = CleanupReport()
        with signals_deferred() as got:
            self._adopt_unrecorded()
            for eli in list(self.devices.eli):
                self._remove(report, eli, functools.partial(self._detach_forced, eli), self.devices.eli)
            for md in list(reversed(self.devices.md)):
                self._remove(report, md, functools.partial(self._destroy_forced, md), self.devices.md)
            self._verify(report)
            self._sync_state()
        if got:
            self.interrupted = "SIGTERM" if signal.SIGTERM in got else "Ctrl-C"
        return report

    def _sync_state(self) -> None:
        """After cleanup: the state file must not name units that are gone (a removal that was
        interrupted, or verified only afterwards), or a later run could take a new md for ours."""
        alive = set(self.devices.md) | ({self.pending} if self.pending else set())
        if self._state_ours == alive:
            return
        try:
            self.write_state()
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)

    def _note(self, exc: BaseException) -> None:
        """An interrupt that cleanup swallowed to finish its work; re-raised afterwards."""
        if isinstance(exc, KeyboardInterrupt) and self.interrupted is None:
            self.interrupted = exc.reason if isinstance(exc, BenchInterrupted) else "Ctrl-C"

    def _adopt_unrecorded(self) -> None:
        """Devices a step created before it could report them (interrupted mid-command)."""
        try:
            if self.pending is not None:
                # mdconfig without -L, told to create this unit: ours if it is there now, was not
                # before, and is a swap md (the state file already names it as ours)
                name, self.pending = self.pending, None
                rows, _ = parse_md_rows(
                    self.must("cleanup: find unrecorded md", "mdconfig -l -v").stdout.decode(errors="replace")
                )
                if any(r.name == name and r.type in (None, "swap") for r in rows) and name not in self.devices.before:
                    self.devices.md.append(name)
                else:
                    self.sizes.pop(name, None)
                    self.write_state()
            elif self.step == ST_CREATE and self.label_supported:
                # mdconfig may have created the unit and been interrupted before we read its
                # name: ours are the labelled units that did not exist before this run.
                known = self.devices.before | set(self.devices.md)
                for e in self.list_md("cleanup: find unrecorded md"):
                    if e.label == LABEL and e.name not in known:
                        self.devices.md.append(e.name)
            for md in list(self.devices.md):
                eli = f"{md}.eli"
                if eli in self.devices.eli:
                    continue
                if self.run("cleanup: find unrecorded GELI", f"test -c /dev/{eli}").ok:
                    self.devices.eli.append(eli)
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)
            return

    def _gone(self, dev: str) -> bool:
        try:
            if dev.endswith(".eli"):
                return not self.run("verify cleanup", f"test -c /dev/{dev}").ok
            return dev not in {e.name for e in self.list_md("verify cleanup")}
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)
            return False

    def _detach_forced(self, eli: str, force: bool) -> None:
        self.detach_geli(eli, force=force)

    def _destroy_forced(self, md: str, force: bool) -> None:
        self.destroy_md(md, force=force)

    def _remove(
        self, report: CleanupReport, dev: str, action: Callable[[bool], None], tracked: list[str]
    ) -> None:
        why = ""
        for force in (False, True):
            try:
                action(force)
                report.removed.append(dev)
                return
            except BenchError as exc:
                why = exc.detail
            except (Exception, KeyboardInterrupt) as exc:  # keep cleaning whatever happens
                self._note(exc)
                why = f"{type(exc).__name__}: {exc}"
            if dev not in tracked:  # removed; what failed came after (e.g. the state file)
                report.removed.append(dev)
                return
            if not force:
                time.sleep(RETRY_DELAY_S)  # a device fio just let go of may need a moment
        if self._gone(dev):  # e.g. an interrupted detach that had in fact completed
            tracked.remove(dev)
            report.removed.append(dev)
            return
        report.failed.append((dev, why))

    def _verify(self, report: CleanupReport) -> None:
        for dev, why in list(report.failed):  # gone after all, e.g. with its md forced away
            if self._gone(dev):
                report.failed.remove((dev, why))
                report.removed.append(dev)
                for tracked in (self.devices.eli, self.devices.md):
                    if dev in tracked:
                        tracked.remove(dev)
        failed = {d for d, _ in report.failed}
        try:
            alive = {e.name for e in self.list_md("verify cleanup")}
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)
            for dev in report.removed:
                report.failed.append((dev, f"could not verify removal: {exc}"))
            return
        for dev in list(report.removed):
            base = dev[: -len(".eli")] if dev.endswith(".eli") else dev
            if dev.endswith(".eli"):
                try:
                    still = self.run("verify cleanup", f"test -c /dev/{dev}").ok
                except (Exception, KeyboardInterrupt) as exc:
                    self._note(exc)
                    still = True
            else:
                still = base in alive
            if still and dev not in failed:
                report.removed.remove(dev)
                report.failed.append((dev, "still present after removal"))
