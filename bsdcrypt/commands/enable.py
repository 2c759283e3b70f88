"""`bsdcrypt enable` and `bsdcrypt disable --persist` (docs/enable.md).

gather (one probe) -> assess -> plan (pure) -> show -> confirm -> act (through host.run only).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from bsdcrypt.cli import HostOpt
from bsdcrypt.plan import Note, Plan, PlanInput, Refuse, RunCommand, WriteFile, loader_driver

FORMATS = ("text", "json")
EXIT_DECLINED = 1
EXIT_REFUSED = 2
MAX_LOADER_FILE = 1 << 20  # real loader.conf files are a few KiB; the editor and diff are not built for more

DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", "-n", help="Show the diff and the commands; change nothing.")
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (for scripts).")]
RootOpt = Annotated[
    str,
    typer.Option(
        "--root",
        "-R",
        help="Edit the loader configuration of a system mounted at DIR (like sysrc -R); "
        "the running kernel is not touched.",
    ),
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="text or json.")]


def plan_to_dict(plan: Plan) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for a in plan.actions:
        if isinstance(a, RunCommand):
            out.append({"action": "run", "argv": list(a.argv), "why": a.why})
        elif isinstance(a, WriteFile):
            out.append(
                {
                    "action": "write",
                    "path": a.edit.path,
                    "create": not a.edit.existed,
                    "why": a.why,
                    "diff": a.edit.diff(),
                }
            )
        elif isinstance(a, Refuse):
            out.append({"action": "refuse", "reason": a.reason, "advice": a.advice})
        elif isinstance(a, Note):
            out.append({"action": "note", "text": a.text})
    return out


def render_plan(plan: Plan, host: str) -> str:
    lines = [f"bsdcrypt plan for {host}:"]
    for a in plan.actions:
        if isinstance(a, Note):
            lines.append(f"  - {a.text}")
        elif isinstance(a, Refuse) and not a.needs_root:
            lines.append(f"  ! refused: {a.reason}.")
            lines.append(f"    what to do: {a.advice}")
        elif isinstance(a, RunCommand):
            lines.append(f"  $ {' '.join(a.argv)}    # {a.why}")
        elif isinstance(a, WriteFile):
            lines.append(f"  > {a.edit.path}    # {a.why}")
    for a in plan.actions:
        if isinstance(a, Refuse) and a.needs_root:
            lines.append(f"  ! not as this user: {a.reason}; {a.advice}.")
    diffs = [w.edit.diff() for w in plan.writes]
    return "\n".join(lines) + "\n" + ("\n" + "".join(diffs) if diffs else "")


def _confirm(yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        from bsdcrypt.cli import fail

        fail(
            "not changing anything without confirmation: re-run with --yes (or --dry-run to look)",
            EXIT_REFUSED,
        )
    if not typer.confirm("Apply these changes?", default=False):
        # Not done, by the user's choice: 1, distinct from done (0), refused (2) and error (3).
        typer.echo("nothing changed.")
        raise typer.Exit(EXIT_DECLINED)


PlanFor = Callable[[PlanInput, list[tuple[str, bytes]]], Plan]


def _one_write_per_file(host: Any, plan: Plan, files: list[tuple[str, bytes]], root: str, name: str) -> Plan:
    """Two names of one loader file (`loader.conf.local -> loader.conf`): written once, or refused
    (exit 2) when that cannot give the planned value (act.merge_same_files). A recording has no
    files to resolve: its plan is shown as it is."""
    from bsdcrypt.recording import ReplayHost
    from bsdcrypt.verbose import unwrap

    if not plan.writes or isinstance(unwrap(host), ReplayHost):
        return plan
    from bsdcrypt.act import ActError, merge_same_files, real_paths
    from bsdcrypt.cli import fail

    paths = [p for p, _ in files] + [w.edit.path for w in plan.writes]
    try:
        return merge_same_files(plan, files, real_paths(host, paths, root), name)
    except ActError as exc:
        fail(f"refused: {exc}", EXIT_REFUSED)


def _execute(
    host_spec: str,
    plan_for: PlanFor,
    *,
    dry_run: bool,
    yes: bool,
    fmt: str,
    root: str,
    bench: bool = False,
    bench_html: str | None = None,
) -> None:
    from bsdcrypt.act import perform, read_loader_files
    from bsdcrypt.assess import assess
    from bsdcrypt.cli import fail
    from bsdcrypt.host import parse_host_spec
    from bsdcrypt.loaderconf import EditError, files_from_evidence, read_by_loader
    from bsdcrypt.probe import gather

    if fmt not in FORMATS:
        fail(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    host = parse_host_spec(host_spec)
    eb: Any = None  # --bench: bsdcrypt.commands.bench.EnableBench
    try:
        if root:
            from bsdcrypt.act import ActError, check_root
            from bsdcrypt.recording import ReplayHost
            from bsdcrypt.verbose import unwrap

            if isinstance(unwrap(host), ReplayHost):  # -v wraps the host: look under it
                fail(
                    f"--root needs a host with a file system, and {host.spec} is a recording: use --root "
                    "on the local machine (or with --host over SSH)"
                )
            try:
                check_root(host, root)
            except ActError as exc:
                fail(str(exc))
        evidence = gather(host)
        status = assess(evidence, host.name, host.spec)
        # With --root the files come from DIR; otherwise the probe already read them (the write
        # re-checks their content on the host, so a change in between is caught, not clobbered).
        files = read_loader_files(host, root) if root else files_from_evidence(evidence)
        from bsdcrypt.assess import UNCOLLECTED

        if not root and UNCOLLECTED in (status.persist.uncertain or ""):
            from bsdcrypt.act import ActError
            from bsdcrypt.recording import ReplayHost
            from bsdcrypt.verbose import unwrap

            if not isinstance(unwrap(host), ReplayHost):  # follow loader_conf_files & co. to the end
                try:
                    files = read_loader_files(host)
                except ActError as exc:
                    fail(str(exc))
        inp = PlanInput.from_status(status)
        major = status.os.major
        if root:
            from dataclasses import replace

            from bsdcrypt.act import read_root_system
            from bsdcrypt.parsers.version import parse_release
            from bsdcrypt.platform import primary_driver

            system = read_root_system(host, root)
            inp = replace(inp, root_release=system.release, root_variant=system.variant)
            if system.arch:  # the image's kernel decides the driver, not the machine running bsdcrypt
                inp = replace(inp, arch=system.arch, driver=primary_driver(system.arch))
            rel = parse_release(inp.root_release) if inp.root_release else None
            major = rel.major if rel else None
            inp = replace(inp, major=major, blacklisted=None)
        # Before 13.0 the loader does not read loader.conf.d: lines there neither count nor get edited.
        files = read_by_loader(files, major)
        for path, data in files:
            if len(data) > MAX_LOADER_FILE:
                fail(f"{path} is {len(data) // 1024} KiB: not a loader configuration bsdcrypt will edit (limit 1 MiB)")
        try:
            plan: Plan = plan_for(inp, files)
        except EditError as exc:  # the editor could not prove a change correct: one line, nothing written
            fail(str(exc))
        plan = _one_write_per_file(host, plan, files, root, loader_driver(inp))
        if bench and not dry_run and plan.refusal is None:
            from bsdcrypt.commands.bench import EnableBench

            eb = EnableBench(fmt, html=bench_html)
        if fmt == "json":
            target = f"{status.host}:{root}" if root else status.host
            doc = {"host": target, "plan": plan_to_dict(plan)}
            if eb is not None:
                eb.document = doc  # printed when enable is done, with the "bench" member
            else:
                typer.echo(json.dumps(doc, indent=2))
        else:
            typer.echo(render_plan(plan, f"the system at {root} (on {status.host})" if root else status.host), nl=False)
        if plan.refusal is not None:
            if dry_run and plan.refusal.needs_root:
                # The plan is what root would do: showing it is what a dry run is for.
                if fmt == "text":
                    typer.echo("dry run: nothing changed (applying this needs root).")
                raise typer.Exit(0)
            raise typer.Exit(EXIT_REFUSED)
        if not plan.changes_something:
            if fmt == "text":
                typer.echo("nothing to change.")
            if eb is not None:
                # Compiled in, already loaded, or nothing to load: no "before"; report the absolute figure.
                eb.measure(host, status, "as it is", state="nothing was changed")
                eb.report(eb.no_before_reason(status, loads_driver=False, changes=False))
            raise typer.Exit(0)
        if dry_run:
            if fmt == "text":
                typer.echo("dry run: nothing changed." + (" (--bench would measure before and after)" if bench else ""))
            raise typer.Exit(0)
        _confirm(yes)
        loads_driver = any(isinstance(a, RunCommand) and a.argv[:1] == ("kldload",) for a in plan.actions)
        if eb is not None and loads_driver:
            eb.measure(host, status, "before", state="nothing was changed (enable had not started)")
        from bsdcrypt.act import ActInterrupted

        try:
            perform(host, plan, echo=lambda line: typer.echo(f"  {line}", err=fmt == "json"), root=root)
        except ActInterrupted as exc:  # what was put back, and the state of the file being written
            typer.echo(f"bsdcrypt: {exc}", err=True)
            raise typer.Exit(130) from exc
        if plan.writes:
            from bsdcrypt.loaderconf import effective
            from bsdcrypt.loadermodel import outcomes

            driver = loader_driver(inp)
            reread = read_by_loader(read_loader_files(host, root), major)
            eff = effective(reread, f"{driver}_load")
            where = f"{eff.path}:{eff.line}" if eff else "nowhere"
            loads = all(o.loads for o in outcomes(reread, driver, major, root))
            state = "in effect" if loads else "not in effect"
            typer.echo(f'  re-read: {driver}_load="YES" is {state} ({where})', err=fmt == "json")
        if eb is not None:
            after_status = assess(gather(host), host.name, host.spec)
            eb.measure(host, after_status, "after", state=eb.done(loads_driver, bool(plan.writes)))
            eb.report(eb.no_before_reason(status, loads_driver=loads_driver, changes=True))
    finally:
        if eb is not None:
            eb.close()
        host.close()


def enable(
    persist: Annotated[
        bool, typer.Option("--persist", "-p", help="Also load it at every boot (loader.conf).")
    ] = False,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    host: HostOpt = "local",
    root: RootOpt = "",
    fmt: FormatOpt = "text",
    bench: Annotated[bool, typer.Option("--bench", help="Measure before/after with bsdcrypt bench.")] = False,
    bench_html: Annotated[
        str | None,
        typer.Option("--bench-html", help="With --bench: also write the before/after charts as one HTML page."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="With --root: write aesni_load even for a 13.0+ system (custom kernel)."),
    ] = False,
) -> None:
    """Load the kernel AES driver now (kldload) and, with --persist, at every boot.

    Explains every no-op (compiled in, no AES-NI, VM hiding it, appliance). Exit status: 0 done or
    nothing to do, 1 confirmation declined (nothing changed), 2 refused, 3 error.
    """
    from bsdcrypt.cli import fail
    from bsdcrypt.plan import plan_enable

    if root and bench:
        fail(
            "--bench measures the running kernel, not the system at --root DIR: "
            "use --bench without --root"
        )
    if bench_html is not None:
        if not bench:
            fail("--bench-html FILE goes with --bench (it is the page of the before/after measurements)")
        from bsdcrypt.errors import BsdcryptError
        from bsdcrypt.fsutil import check_output_path

        try:
            check_output_path(bench_html)  # before anything is changed or measured
        except BsdcryptError as exc:
            fail(str(exc))
    if force and not root:
        fail(
            "--force only applies with --root DIR (a 13.0+ system booting a custom kernel); on a running "
            "host the kernel itself shows whether the driver is compiled in"
        )

    def plan_for(inp: PlanInput, files: list[tuple[str, bytes]]) -> Plan:
        return plan_enable(inp, files, persist=persist, root=root, force=force)

    _execute(host, plan_for, dry_run=dry_run, yes=yes, fmt=fmt, root=root, bench=bench, bench_html=bench_html)


def disable(
    persist: Annotated[
        bool, typer.Option("--persist", "-p", help="Undo what enable --persist changed.")
    ] = False,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    host: HostOpt = "local",
    root: RootOpt = "",
    fmt: FormatOpt = "text",
) -> None:
    """Undo exactly what `enable --persist` changed in the loader configuration."""
    from bsdcrypt.cli import fail
    from bsdcrypt.plan import plan_disable

    if not persist:
        fail(
            "only `disable --persist` exists: it undoes enable's loader.conf change (the driver stays loaded "
            "until reboot)"
        )

    def plan_for(inp: PlanInput, files: list[tuple[str, bytes]]) -> Plan:
        return plan_disable(files, loader_driver(inp), is_root=None if root else inp.is_root)

    _execute(host, plan_for, dry_run=dry_run, yes=yes, fmt=fmt, root=root)


def register(app: typer.Typer) -> None:
    app.command("enable")(enable)
    app.command("disable")(disable)
