"""`bsdcrypt enable` and `bsdcrypt disable` (docs/enable.md): options -> enable.flow -> exit code.

The flow (bsdcrypt.enable.flow) does the work; this module shows the plan, asks, and turns the
outcome into an exit status.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from bsdcrypt.cli.options import HostOpt, SSHOpt, nonempty, text_width
from bsdcrypt.enable import flow
from bsdcrypt.enable.flow import EXIT_DECLINED as EXIT_DECLINED  # the exit codes, for importers of old
from bsdcrypt.enable.flow import EXIT_REFUSED, FlowError, PlanFor
from bsdcrypt.enable.plan import Plan, PlanInput, loader_driver
from bsdcrypt.render.plan import plan_to_dict, render_plan
from bsdcrypt.status import Status

EXIT_INTERRUPTED = 130  # end of input at the confirmation prompt, as Ctrl-C there

FORMATS = ("text", "json")

DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", "-n", help="Show the diff and the commands; change nothing.")
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (for scripts).")]
RootOpt = Annotated[
    str | None,
    typer.Option(
        "--root",
        "-R",
        help="Edit the loader configuration of a system mounted at DIR (like sysrc -R); "
        "the running kernel is not touched.",
        metavar="DIR",
        callback=nonempty,
    ),
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="text or json.", metavar="FORMAT")]


def _fit(text: str, indent: str) -> str:
    """A line of enable's progress, wrapped under `indent` on a terminal (whole in a pipe)."""
    width = text_width()
    if width is None or len(indent + text) <= width:
        return indent + text
    from bsdcrypt.render.fit import usable, wrap

    return "\n".join(wrap(text, usable(width) or width, indent, indent + "  "))


class _Hooks:
    """The flow's hooks: the plan and remarks on stdout (JSON: one document), progress on stderr with
    JSON, the confirmation prompt on the terminal."""

    def __init__(self, fmt: str, bench_html: str | None = None) -> None:
        self.fmt = fmt
        self.bench_html = bench_html
        self.eb: Any = None  # --bench: bsdcrypt.enable.bench.EnableBench, made by bench_for
        self.document: dict[str, Any] | None = None  # JSON with --bench: printed at the end, with "bench"

    def bench_for(self) -> Any:
        from bsdcrypt.enable.bench import EnableBench
        from bsdcrypt.text import visible  # a bench error can quote host text

        self.eb = EnableBench(tell=lambda line: typer.echo(visible(line, None), err=True))
        return self.eb

    def show(self, plan: Plan, status: Status, root: str) -> None:
        if self.fmt == "json":
            doc = {"host": f"{status.host}:{root}" if root else status.host, "plan": plan_to_dict(plan)}
            if self.eb is not None:
                self.document = doc  # printed when enable is done, with the "bench" member
            else:
                typer.echo(json.dumps(doc, indent=2))
        else:
            where = f"the system at {root} (on {status.host})" if root else status.host
            typer.echo(render_plan(plan, where, text_width()), nl=False)

    def note(self, text: str) -> None:
        if self.fmt == "text":
            typer.echo(_fit(text, ""))

    def say(self, line: str) -> None:
        from bsdcrypt.text import visible  # paths and messages can carry host text

        typer.echo(_fit(visible(line, None), "  "), err=self.fmt == "json")

    def confirm(self) -> bool:
        if not sys.stdin.isatty():
            raise FlowError(
                "not changing anything without confirmation: re-run with --yes (or --dry-run to look)", EXIT_REFUSED
            )
        try:
            agreed = typer.confirm("Apply these changes?", default=False)
        except typer.Abort:  # end of input (Ctrl-D) or Ctrl-C at the prompt: interrupted, not an answer
            typer.echo("\nbsdcrypt: interrupted at the confirmation prompt: nothing changed", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        if agreed:
            return True
        # Not done, by the user's choice: 1, distinct from done (0), refused (2) and error (3).
        typer.echo("nothing changed.")
        return False

    def bench_report(self) -> None:
        """--bench, once the flow got to its end: the page (--bench-html) and, as text, the table."""
        from bsdcrypt.render.bench import enable_bench_page, enable_bench_table

        eb = self.eb
        if eb is None or not eb.finished:
            return
        if self.bench_html:
            page = enable_bench_page(eb)
            if page is not None:
                from bsdcrypt.cli.options import write_report

                try:
                    write_report(page, self.bench_html)
                except OSError as exc:
                    eb.errors.append(f"could not write {self.bench_html}: {exc}")
                    typer.echo(f"bsdcrypt: could not write {self.bench_html}: {exc}", err=True)
                else:
                    if self.fmt == "text":
                        typer.echo(f"bench report: {self.bench_html}")
        if self.fmt == "text":
            typer.echo(enable_bench_table(eb), nl=False)

    def close(self) -> None:
        """JSON with --bench: enable's document with the "bench" member, once, whatever happened."""
        if self.eb is not None and self.document is not None:
            doc, self.document = self.document, None
            typer.echo(json.dumps({**doc, "bench": self.eb.to_dict()}, indent=2))


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
    ssh: str = "paramiko",
) -> None:
    from bsdcrypt.cli.options import error_line, fail
    from bsdcrypt.enable.act import ActInterrupted
    from bsdcrypt.enable.bench import EnableBenchInterrupted
    from bsdcrypt.hosts.open import parse_host_spec

    if fmt not in FORMATS:
        fail(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    host = parse_host_spec(host_spec, ssh)
    hooks = _Hooks(fmt, bench_html)
    request = flow.Request(plan_for, root=root, dry_run=dry_run, yes=yes, bench=bench)
    try:
        code = flow.run(host, request, hooks, hooks.bench_for)
        hooks.bench_report()
    except FlowError as exc:
        fail(str(exc), exc.code)
    except ActInterrupted as exc:  # what was put back, and the state of the file being written
        typer.echo(f"bsdcrypt: {exc}", err=True)
        raise typer.Exit(130) from exc
    except EnableBenchInterrupted as exc:  # what the bench's cleanup did, and what enable had changed
        typer.echo(error_line(exc.bench), err=True)
        typer.echo(f"bsdcrypt: {exc.state}", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from exc
    finally:
        hooks.close()
        host.close()
    raise typer.Exit(code)


def enable(
    persist: Annotated[
        bool, typer.Option("--persist", "-p", help="Also load it at every boot (loader.conf).")
    ] = False,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    host: HostOpt = "local",
    ssh: SSHOpt = "paramiko",
    root: RootOpt = None,
    fmt: FormatOpt = "text",
    bench: Annotated[bool, typer.Option("--bench", help="Measure before/after with bsdcrypt bench.")] = False,
    bench_html: Annotated[
        str | None,
        typer.Option(
            "--bench-html",
            help="With --bench: also write the before/after charts as one HTML page.",
            metavar="FILE",
            callback=nonempty,
        ),
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
    from bsdcrypt.cli.options import fail
    from bsdcrypt.enable.plan import plan_enable

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
        return plan_enable(inp, files, persist=persist, root=root or "", force=force)

    _execute(host, plan_for, dry_run=dry_run, yes=yes, fmt=fmt, root=root or "", bench=bench, bench_html=bench_html,
             ssh=ssh)


def disable(
    persist: Annotated[
        bool,
        typer.Option(
            "--persist", "-p", help="The same as without it: disable always undoes the boot-time change (for scripts)."
        ),
    ] = False,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    host: HostOpt = "local",
    ssh: SSHOpt = "paramiko",
    root: RootOpt = None,
    fmt: FormatOpt = "text",
) -> None:
    """Undo exactly what `enable --persist` changed in the loader configuration.

    The driver stays loaded until the next boot: disable never unloads it (a driver compiled into the
    kernel cannot be, and kldunload would pull it from under GELI, IPsec or KTLS sessions using it).
    """
    from bsdcrypt.enable.plan import plan_disable

    del persist  # disable only ever undoes the boot-time change: with or without --persist

    def plan_for(inp: PlanInput, files: list[tuple[str, bytes]]) -> Plan:
        return plan_disable(files, loader_driver(inp), is_root=None if root else inp.is_root, live=not root)

    _execute(host, plan_for, dry_run=dry_run, yes=yes, fmt=fmt, root=root or "", ssh=ssh)


def register(app: typer.Typer) -> None:
    app.command("enable")(enable)
    app.command("disable")(disable)
