"""One `enable` or `disable --persist` run, without any CLI: an outcome, never an exit.

gather -> parse -> assess (pipeline.read_host) -> read the loader files (the probe's, or under --root DIR) -> plan
(pure) -> one write per file -> show -> confirm -> [bench before] -> perform -> re-read -> [bench after].

What the person sees and answers goes through `Hooks`, which the CLI provides; --bench's measurements
through `BenchHooks`. A refusal or an error is a FlowError carrying its exit code; Ctrl-C/SIGTERM while
performing is ActInterrupted (what was put back), raised as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from bsdcrypt.enable.plan import Plan, PlanInput, RunCommand, loader_driver
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.hostapi import Host
from bsdcrypt.probe import Evidence
from bsdcrypt.status import Status

EXIT_DONE = 0
EXIT_DECLINED = 1  # not done, by the user's choice
EXIT_REFUSED = 2
EXIT_ERROR = 3
MAX_LOADER_FILE = 1 << 20  # real loader.conf files are a few KiB; the editor and diff are not built for more

PlanFor = Callable[[PlanInput, list[tuple[str, bytes]]], Plan]


class FlowError(BsdcryptError):
    """Why the run stopped before changing anything (or how it failed), with its exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


class Hooks(Protocol):
    def show(self, plan: Plan, status: Status, root: str) -> None:
        """Show the plan (text or JSON) before anything is done."""

    def note(self, text: str) -> None:
        """A closing remark for a person ("dry run: nothing changed."); not part of a JSON document."""

    def say(self, line: str) -> None:
        """A line about what is being done, while it is done."""

    def confirm(self) -> bool:
        """Ask before changing anything; False: declined. May raise FlowError (no one to ask)."""


class BenchHooks(Protocol):
    """--bench: GELI-on-md measurements around the change (bsdcrypt.enable.bench.EnableBench)."""

    def measure(self, host: Host, status: Status, phase: str, *, state: str) -> object: ...

    def finish(self, why_no_before: str) -> None: ...

    def no_before_reason(self, status: Status, *, loads_driver: bool, changes: bool) -> str: ...

    def done(self, loads_driver: bool, persisted: bool) -> str: ...


@dataclass(frozen=True)
class Request:
    plan_for: PlanFor
    root: str = ""
    dry_run: bool = False
    yes: bool = False
    bench: bool = False  # measure before/after (needs bench_hooks)


def _root_input(host: Host, root: str, inp: PlanInput) -> tuple[PlanInput, int | None]:
    """What the system at --root DIR is (its release, product and kernel architecture), not the host's."""
    from bsdcrypt.enable.remote import read_root_system
    from bsdcrypt.parsers.version import parse_release
    from bsdcrypt.platform import primary_driver

    system = read_root_system(host, root)
    inp = replace(
        inp,
        root_release=system.release,
        root_variant=system.variant,
        root_not_freebsd=system.not_freebsd,
        root_arch=system.arch,
    )
    if system.arch:  # the image's kernel decides the driver, not the machine running bsdcrypt
        inp = replace(inp, arch=system.arch, driver=primary_driver(system.arch))
    rel = parse_release(inp.root_release) if inp.root_release else None
    return inp, rel.major if rel else None


def one_write_per_file(host: Host, plan: Plan, files: list[tuple[str, bytes]], root: str, name: str) -> Plan:
    """Two names of one loader file (`loader.conf.local -> loader.conf`): written once, or refused
    (exit 2) when that cannot give the planned value (plan.merge_same_files). A recording has no
    files to resolve: its plan is shown as it is."""
    if not plan.writes or not host.can_exec:
        return plan
    from bsdcrypt.enable.merge import merge_same_files
    from bsdcrypt.enable.remote import real_paths
    from bsdcrypt.errors import ActError

    paths = [p for p, _ in files] + [w.edit.path for w in plan.writes]
    try:
        return merge_same_files(plan, files, real_paths(host, paths, root), name)
    except ActError as exc:
        raise FlowError(f"refused: {exc}", EXIT_REFUSED) from None


def _uncollected(evidence: Evidence, files: list[tuple[str, bytes]], driver: str, major: int | None) -> list[str]:
    """The loader files the probe did not collect (named ones, or not read: a device, FIFO, > 1 MiB)."""
    from bsdcrypt.loader.conf import uncollected
    from bsdcrypt.loader.model import outcomes

    return uncollected(evidence, outcomes(files, driver, major))


def prepare(host: Host, req: Request) -> tuple[Status, PlanInput, Plan, int | None]:
    """Everything before the plan is shown: (status, plan input, plan, the major release whose loader
    reads the files). Reads only."""
    from bsdcrypt.enable.remote import check_root, read_loader_files
    from bsdcrypt.errors import ActError
    from bsdcrypt.loader.conf import EditError, read_by_loader
    from bsdcrypt.pipeline import read_host

    root = req.root
    if not host.can_exec and not root and not req.dry_run:
        raise FlowError(f"{host.spec} is a recording, and a recording cannot be changed; use --dry-run to see the plan")
    if root:
        if not host.can_exec:
            raise FlowError(
                f"--root needs a host with a file system, and {host.spec} is a recording: use --root "
                "on the local machine (or with --host over SSH)"
            )
        try:
            check_root(host, root)
        except ActError as exc:
            raise FlowError(str(exc)) from None
    reading = read_host(host)
    status = reading.status
    # With --root the files come from DIR; otherwise the probe already read them (the write
    # re-checks their content on the host, so a change in between is caught, not clobbered).
    try:
        files = read_loader_files(host, root) if root else reading.facts.loader_files
    except ActError as exc:  # a device, FIFO or huge file, a link loop: one line, nothing changed
        raise FlowError(str(exc)) from None
    inp = PlanInput.from_status(status)
    if not root and host.can_exec and _uncollected(reading.evidence, files, loader_driver(inp), status.os.major):
        try:  # follow loader_conf_files & co. to the end; a device or FIFO the probe left is one line here
            files = read_loader_files(host)
        except ActError as exc:
            raise FlowError(str(exc)) from None
    major = status.os.major
    if root:
        inp, major = _root_input(host, root, inp)
        inp = replace(inp, major=major, blacklisted=None)
    # Before 13.0 the loader does not read loader.conf.d: lines there neither count nor get edited.
    files = read_by_loader(files, major)
    for path, data in files:
        if len(data) > MAX_LOADER_FILE:
            raise FlowError(
                f"{path} is {len(data) // 1024} KiB: not a loader configuration bsdcrypt will edit (limit 1 MiB)"
            )
    try:
        plan = req.plan_for(inp, files)
    except EditError as exc:  # the editor could not prove a change correct: one line, nothing written
        raise FlowError(str(exc)) from None
    return status, inp, one_write_per_file(host, plan, files, root, loader_driver(inp)), major


def reread(host: Host, inp: PlanInput, root: str, major: int | None) -> str:
    """After the write: is `<driver>_load="YES"` in effect, as the loader reads the files now?"""
    from bsdcrypt.enable.remote import read_loader_files
    from bsdcrypt.loader.conf import effective, read_by_loader
    from bsdcrypt.loader.model import outcomes

    driver = loader_driver(inp)
    reread = read_by_loader(read_loader_files(host, root), major)
    eff = effective(reread, f"{driver}_load")
    where = f"{eff.path}:{eff.line}" if eff else "nowhere"
    loads = all(o.loads for o in outcomes(reread, driver, major, root))
    state = "in effect" if loads else "not in effect"
    return f're-read: {driver}_load="YES" is {state} ({where})'


def run(
    host: Host,
    req: Request,
    hooks: Hooks,
    bench_for: Callable[[], BenchHooks] | None = None,
) -> int:
    """One run on `host` (closed by the caller): the exit code. `bench_for` makes the --bench hooks
    once the plan is known to change something worth measuring."""
    from bsdcrypt.enable.act import perform
    from bsdcrypt.pipeline import status_of

    status, inp, plan, major = prepare(host, req)
    bench = bench_for() if bench_for is not None and req.bench and not req.dry_run and plan.refusal is None else None
    hooks.show(plan, status, req.root)
    if plan.refusal is not None:
        if req.dry_run and plan.refusal.needs_root:
            # The plan is what root would do: showing it is what a dry run is for.
            hooks.note("dry run: nothing changed (applying this needs root).")
            return EXIT_DONE
        return EXIT_REFUSED
    if not plan.changes_something:
        hooks.note("nothing to change.")
        if bench is not None:
            # Compiled in, already loaded, or nothing to load: no "before"; report the absolute figure.
            bench.measure(host, status, "as it is", state="nothing was changed")
            bench.finish(bench.no_before_reason(status, loads_driver=False, changes=False))
        return EXIT_DONE
    if req.dry_run:
        hooks.note("dry run: nothing changed." + (" (--bench would measure before and after)" if req.bench else ""))
        return EXIT_DONE
    if not req.yes and not hooks.confirm():
        return EXIT_DECLINED
    loads_driver = any(isinstance(a, RunCommand) and a.argv[:1] == ("kldload",) for a in plan.actions)
    if bench is not None and loads_driver:
        bench.measure(host, status, "before", state="nothing was changed (enable had not started)")
    perform(host, plan, echo=hooks.say, root=req.root)
    if plan.writes:
        hooks.say(reread(host, inp, req.root, major))
    if bench is not None:
        after = status_of(host)
        bench.measure(host, after, "after", state=bench.done(loads_driver, bool(plan.writes)))
        bench.finish(bench.no_before_reason(status, loads_driver=loads_driver, changes=True))
    return EXIT_DONE
