"""`BenchSession`: runs the steps on one host, tracks the devices it created, cleans them up."""

from __future__ import annotations

import functools
import shlex
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import bsdcrypt.bench.state as state
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
    BenchParams,
    CleanupReport,
    fio_args,
)
from bsdcrypt.bench.state import (  # noqa: F401  (state, owner: their old home was here)
    RUN_ID,
    StateEntry,
    controller_id,
    controller_name,
    owner_status,
    parse_state,
    this_owner,
)
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.facts import GeliProvider
from bsdcrypt.hostapi import Host, RunResult
from bsdcrypt.interrupts import reason_of, signals_deferred
from bsdcrypt.parsers import fio as fio_parser
from bsdcrypt.parsers.geli import parse_geli_list
from bsdcrypt.parsers.mdconfig import (  # noqa: F401  (parse_human_size, MdRow: their old home was here)
    MD_NAME,
    MdEntry,
    MdRow,
    parse_human_size,
    parse_md_rows,
    parse_mdconfig_list,
)
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


def _same_size(printed: int, recorded: int) -> bool:
    # humanize_number keeps 2-4 significant digits: "1.0G" stands for 0.95-1.05 GiB
    return abs(printed - recorded) <= 0.06 * recorded


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
    line: str | None = None  # its state entry, as in the file

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


class Devices:
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
        self.devices = Devices()
        self.step: str | None = None
        self.progress = progress or (lambda _msg: None)
        self.boottime: int | None = None
        self.label_supported = True
        self.warnings: list[str] = []
        self.interrupted: str | None = None  # an interrupt arrived while cleanup ran
        self.owner = state.this_owner()
        self.pending: str | None = None  # explicit unit being created (mdconfig without -L)
        self.sizes: dict[str, int | None] = {}  # bytes of each md we track, for the state file
        self.leftovers_removed: list[str] = []
        self._written: dict[str, str] = {}  # our units the state file names -> the line written for each
        self._unsure: set[str] = set()  # our lines an interrupted or failed update may have left or not
        self._reported_bad = False

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
        """Every entry of the state file (any boot); [] when it is missing or unreadable. Lines that
        are no entry are skipped, and said once (they never block a bench or a cleanup)."""
        res = self.run(ST_LEFTOVERS, f"cat {STATE_FILE}")
        if not res.ok:
            return []
        bad: list[str] = []
        entries = parse_state(res.stdout.decode(errors="replace"), bad)
        if bad and not self._reported_bad:
            self._reported_bad = True
            first = bad[0] if len(bad[0]) <= 60 else bad[0][:57] + "..."
            self.warnings.append(
                f"ignored {len(bad)} line(s) of {STATE_FILE} that are no bench entry (the first: {first!r}); "
                "they are left in the file"
            )
        return entries

    def _update_state(self, drop: list[str], add: list[str]) -> bool:
        """Change the state file in place, in one command under its own lock: remove the lines `drop`
        (exactly as they are in the file), append `add`. Other runs' lines stay as they are now, not
        as this run read them earlier: no run ever rewrites another's entry away."""
        if not drop and not add:
            return True
        for line in drop + add:  # one line each, nothing a shell or grep pattern could read otherwise
            if "\n" in line or "\r" in line or "\0" in line:
                raise BenchError(ST_STATE, f"refusing to write a state line holding a line break: {line!r}")
        keep = f"grep -vxF {' '.join('-e ' + shlex.quote(d) for d in drop)}" if drop else "cat --"
        body = (
            't=$(mktemp "$S.XXXXXX") || exit 1; trap \'rm -f "$t"\' EXIT; chmod 644 "$t" || exit 1; '
            f'if [ -f "$S" ]; then {keep} "$S" > "$t"; [ $? -le 1 ] || exit 1; fi; '  # grep -v: 1 = no line left
            + (f"printf '%s\\n' {' '.join(shlex.quote(a) for a in add)} >> \"$t\" || exit 1; " if add else "")
            + 'if [ -s "$t" ]; then mv -f "$t" "$S" || exit 1; else rm -f "$S" || exit 1; fi'
        )
        cmd = (
            f"umask 022; S={STATE_FILE}; export S; B={shlex.quote(body)}; "
            'if command -v lockf >/dev/null 2>&1; then exec lockf -k -t 30 "$S.lock" /bin/sh -c "$B"; '
            'elif command -v flock >/dev/null 2>&1; then exec flock -w 30 "$S.lock" /bin/sh -c "$B"; '
            'else exec /bin/sh -c "$B"; fi'
        )
        res = self.run(ST_STATE, cmd)
        if not res.ok:
            self.warnings.append(
                f"could not update {STATE_FILE}: {_first_line(res)} (a crash now leaves devices the next run "
                "cannot attribute)"
            )
        return res.ok

    def write_state(self) -> None:
        """Bring our entries in the state file up to date (one per md this run tracks, or is about to
        create); other runs' entries are not touched."""
        if self.boottime is None:
            return  # cannot date our entries; leave others' alone (the label still marks ours)
        ours = [m for m in self.devices.md if m != self.pending]
        if self.pending is not None:
            ours.append(self.pending)
        want = {
            m: StateEntry(
                self.boottime, m, self.owner, "swap", self.sizes.get(m), state.RUN_ID, state.controller_id()
            ).line()
            for m in ours
        }
        wanted = set(want.values())
        drop = {line for m, line in self._written.items() if want.get(m) != line}
        drop |= {line for line in self._unsure if line not in wanted}
        add = [line for m, line in want.items() if self._written.get(m) != line or line in self._unsure]
        drop |= {line for line in add if line in self._unsure}  # maybe there already: once, not twice
        if not drop and not add:
            return
        self._unsure |= drop | set(add)  # until the host says it is done (an interrupt may come first)
        if self._update_state(sorted(drop), add):
            self._written = want
            self._unsure = set()

    def find_leftovers(self) -> list[Leftover]:
        """md units an earlier bench left behind, each with whether it may be removed.

        With the label column, only units labelled bsdcrypt-bench count, and a state entry says
        whose one is, whatever kern.boottime says now: FreeBSD rewrites kern.boottime at every clock
        step (kern_tc.c tc_setclock), and a labelled md cannot outlive the boot that made it (the
        run that makes the first one after a reboot drops the old entries of units that are gone).
        Without it (mdconfig before -L), an entry counts when the unit is still a swap md of the
        recorded size, and only when its boot time is this one: one of another boot time (a reboot,
        or a clock step) is uncertain and refused, never removed. Entries that no longer hold (unit
        gone, unit with another or no label, other type or size) are dropped from the file, unless
        their owner still runs here, and their units are never touched. The last entry for a unit
        wins (the file is appended to).
        """
        rows, label_column = parse_md_rows(self.must(ST_LEFTOVERS, "mdconfig -l -v").stdout.decode(errors="replace"))
        by_name = {r.name: r for r in rows}
        latest: dict[str, StateEntry] = {}
        stale: list[str] = []
        for e in self.read_state():
            earlier = latest.get(e.md)
            if earlier is not None and earlier.raw and earlier.raw != e.raw:
                stale.append(earlier.raw)  # superseded by a later line for the same unit
            latest[e.md] = e
        claimed: dict[str, StateEntry] = {}
        uncertain: dict[str, str] = {}
        for md, e in latest.items():
            row = by_name.get(md)
            if row is None or (label_column and row.label != LABEL):
                # Only a crashed run's entry (or one naming no owner) goes: a running bench records its
                # unit before creating it, and a run on another machine cannot be checked from here;
                # dropping its entry would leave its md unclaimed once created, for a --cleanup to take.
                if e.owner is None or state.owner_status(e.owner, e.controller) == "dead":
                    stale.append(e.raw or e.line())
                continue
            if label_column:
                claimed[md] = e
                continue
            ok = row.type in (None, "swap") and e.type in (None, "swap")
            if e.size is not None and row.size is not None:
                ok = ok and _same_size(row.size, e.size)
            if not ok:
                stale.append(e.raw or e.line())
            elif self.boottime is not None and e.boottime == self.boottime:
                claimed[md] = e
            else:
                now = "unknown" if self.boottime is None else str(self.boottime)
                uncertain[md] = (
                    f"{md} is listed in {STATE_FILE} with boot time {e.boottime}, and kern.boottime is {now} "
                    "now (a reboot, or a clock step: FreeBSD moves kern.boottime with the clock), and this "
                    "mdconfig has no labels to tell; if no bsdcrypt bench is running, remove it by hand: "
                    f"{_by_hand(md)}, then delete its line from {STATE_FILE}"
                )
        candidates = set(claimed) | set(uncertain)
        if label_column:
            candidates |= {r.name for r in rows if r.label == LABEL}
        leftovers = [
            Leftover(md, "unverified", latest[md].owner, uncertain[md]) if md in uncertain
            else self._classify(md, claimed.get(md), label_column)
            for md in candidates
        ]
        if stale:
            self._update_state(stale, [])
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
        status = state.owner_status(entry.owner, entry.controller)
        if status == "dead":
            why = f"{md} was left by bsdcrypt {who}, which is no longer running"
        elif status == "alive":
            why = (
                f"{md} belongs to a bsdcrypt bench that is still running ({who}); wait for it to finish (two "
                "benches at once would measure each other)"
            )
        else:
            other = " (another machine of that name)" if who.split(" on ", 1)[1] == state.controller_name() else ""
            why = (
                f"{md} belongs to a bsdcrypt bench started from {who.split(' on ', 1)[1]}{other} ({who}), which "
                f"cannot be checked from here; run `bsdcrypt bench --cleanup` there, or if it is no longer "
                f"running, remove it by hand: {_by_hand(md)}"
            )
        return Leftover(md, status, entry.owner, why, entry.raw)

    def adopt_leftover(self, leftover: Leftover) -> None:
        """Take a leftover over (with its .eli, if any) so that cleanup() removes it; its state entry
        goes once it is removed."""
        md = leftover.md
        if not MD_NAME.match(md) or md in self.devices.md:
            return
        self.devices.md.append(md)
        if leftover.line:
            self._written[md] = leftover.line  # ours now: the state bookkeeping drops it with the md
        if self.run(ST_LEFTOVERS, f"test -c /dev/{md}.eli").ok:
            self.devices.eli.append(f"{md}.eli")

    # -- device lifecycle
    def create_md(self) -> str:
        size = f"{self.params.size_mib}m"
        listed = self.list_md()
        self.devices.before = {e.name for e in listed}
        base = f"mdconfig -a -t swap -s {size}"
        md = self._create_unit(base)
        self.progress(f"created {md} ({size}, swap-backed)")
        return md

    def _create_unit(self, base: str) -> str:
        """Pick the unit, record it in the state file as ours, then create it (`-u N`, labelled
        when mdconfig has -L). Recorded first, the md is never without an owner: a `--cleanup`
        (from any machine) between the creation and our record would otherwise take a labelled md
        no entry claims for a crashed run's and destroy it under this bench; and an interrupt
        between creating it and reading mdconfig's answer cannot leak an md that nothing could
        recognise later."""
        taken = set(self.devices.before)
        for _ in range(CREATE_TRIES):
            unit = next(n for n in range(1 << 20) if f"md{n}" not in taken)
            name = f"md{unit}"
            self.pending = name
            self.sizes[name] = self.params.size_mib * MIB
            self.write_state()
            res = self._create(base, unit)
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

    def _create(self, base: str, unit: int) -> RunResult:
        if self.label_supported:
            res = self.run(ST_CREATE, f"{base} -L {LABEL} -u {unit}")
            err = res.stderr.decode(errors="replace")
            if res.ok or not ("illegal option" in err or "usage:" in err):
                return res
            self.label_supported = False  # mdconfig before -L: rely on the state file
        return self.run(ST_CREATE, f"{base} -u {unit}")

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
        if set(self._written) == alive and not self._unsure:
            return
        try:
            self.write_state()
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)

    def _note(self, exc: BaseException) -> None:
        """An interrupt that cleanup swallowed to finish its work; re-raised afterwards."""
        if isinstance(exc, KeyboardInterrupt) and self.interrupted is None:
            self.interrupted = reason_of(exc)

    def _adopt_unrecorded(self) -> None:
        """Devices a step created before it could report them (interrupted mid-command)."""
        try:
            if self.pending is not None:
                # told to create this unit (its state entry already names us as the owner): ours if
                # it is there now, was not before, and is a swap md of our size (with our label, when
                # mdconfig was given -L); anything else at that unit is another's and is left alone
                name, self.pending = self.pending, None
                rows, label_column = parse_md_rows(
                    self.must("cleanup: find unrecorded md", "mdconfig -l -v").stdout.decode(errors="replace")
                )
                want = self.sizes.get(name)
                if name not in self.devices.before and any(
                    r.name == name
                    and r.type in (None, "swap")
                    and (r.size is None or want is None or _same_size(r.size, want))
                    and (not (label_column and self.label_supported) or r.label == LABEL)
                    for r in rows
                ):
                    self.devices.md.append(name)
                else:
                    self.sizes.pop(name, None)
                    self.write_state()
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
