"""`bsdcrypt probe-script` and `bsdcrypt analyze`: let another engine (Ansible, ...) run the probe."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from bsdcrypt.cli.options import FleetFormatOpt, OutputOpt, error_line, nonempty

if TYPE_CHECKING:
    pass

FORMATS = ("table", "json", "yaml", "csv", "prometheus", "html")


def probe_script(
    token: Annotated[
        str | None,
        typer.Option("--token", help="Frame marker to use instead of @@bsdcrypt-standalone (analyze finds it)."),
    ] = None,
) -> None:
    """Print the read-only probe as a standalone sh script, for any engine to run with /bin/sh.

    Its stdout is what `bsdcrypt analyze` reads. It needs no root and changes nothing.
    """
    from bsdcrypt.collect.analyze import STANDALONE_TOKEN, standalone_script

    typer.echo(standalone_script(token or STANDALONE_TOKEN), nl=False)


def analyze(
    files: Annotated[
        list[str],
        typer.Argument(
            help="Probe outputs, Ansible json-callback outputs, ansible --tree dirs, recordings, or pastes "
            "(a dmesg.boot, or dmesg, kldstat -v, uname -a, geli list and loader.conf glued together); - is stdin.",
            metavar="FILE...",
            callback=nonempty,
        ),
    ],
    fmt: FleetFormatOpt = "table",
    output: OutputOpt = None,
    token: Annotated[
        str | None, typer.Option("--token", help="Frame marker, if not the one in the first frame.", callback=nonempty)
    ] = None,
) -> None:
    """Assess probe output collected by another engine; the report of fleet-audit, one row per host.

    Exit status: the worst host's (0 OK, 1 warning, 2 critical, 3 unknown or not collected).
    """
    from bsdcrypt.errors import BsdcryptError
    from bsdcrypt.fsutil import OutputError

    try:
        code = _analyze(files, fmt, output, token)
    except OutputError:
        raise  # the report could not be delivered: its own exit status (bsdcrypt.cli.main)
    except BsdcryptError as exc:
        typer.echo(error_line(exc), err=True)
        raise typer.Exit(3) from None
    raise typer.Exit(code)


def _expand(files: list[str]) -> list[tuple[str, bool]]:
    """A directory (e.g. `ansible --tree DIR`) stands for the files in it, by name; dotfiles skipped.
    Each path comes with whether it was found in a directory (rather than named by the user)."""
    import os

    out: list[tuple[str, bool]] = []
    for path in files:
        if path != "-" and os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if not n.startswith("."))
            out += [(os.path.join(path, n), True) for n in names if os.path.isfile(os.path.join(path, n))]
        else:
            out.append((path, False))
    return out


MAX_INPUT = 64 << 20  # 64 MiB: Ansible's JSON for a 1,000-host play of 50 KB probe outputs, escaped


def _read(path: str) -> bytes:
    from bsdcrypt.fsutil import read_input

    return read_input(path, MAX_INPUT, "input")


def _analyze(files: list[str], fmt: str, output: str | None, token: str | None) -> int:
    import time

    from bsdcrypt import fleet
    from bsdcrypt.collect.analyze import collect_file, to_status
    from bsdcrypt.errors import BsdcryptError
    from bsdcrypt.hostsfile import HostEntry

    if fmt not in FORMATS:
        raise BsdcryptError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    started = time.monotonic()
    results: list[fleet.HostResult] = []
    paths = _expand(files)
    if not paths:
        raise BsdcryptError("no input files (the directories given are empty)")
    from bsdcrypt.collect.analyze import Collected

    named = tuple(path for path, in_dir in paths if not in_dir)
    if output is not None and output != "-":
        from bsdcrypt.fsutil import check_output_path

        check_output_path(output, named)  # the analyzed files are never overwritten by the report
    used = list(named)
    skipped = 0
    for path, in_dir in paths:
        try:
            collected = collect_file(path, _read(path), token)
        except BsdcryptError as exc:  # one unreadable file is a row, not the end of the run
            collected = [Collected(path, path, f"file:{path}", error_kind="unreadable", error=str(exc))]
        if in_dir and len(collected) == 1 and collected[0].unrecognised:
            # a README, probe.sh or an earlier report beside the collected outputs: not a host
            from bsdcrypt.cli.options import note

            note(f"skipped {path}: not probe output, Ansible JSON or a recording")
            skipped += 1
            continue
        if in_dir:
            used.append(path)
        for c in collected:
            results.append(
                fleet.HostResult(HostEntry(spec=c.target, source=c.origin), to_status(c), 0.0, c.error, c.error_kind)
            )
    if not results:
        raise BsdcryptError(f"nothing to analyze: no probe output, Ansible output or recording ({skipped} skipped)")
    run = fleet.FleetRun(results, time.monotonic() - started, parallel=1, timeout=0.0)
    from bsdcrypt.render.fleet import render, render_collected

    if fmt == "table":
        from bsdcrypt.cli.options import text_width

        report = render_collected(run, text_width(output))
    elif fmt == "html":
        from bsdcrypt.render.html import fleet_page  # Jinja2: only on this path

        source = ", ".join("standard input" if f == "-" else f for f in files)
        report = fleet_page(run, title="bsdcrypt fleet report (analyze)", source=source, command="analyze")
    else:
        report = render(run, fmt)
    from bsdcrypt.cli.options import write_report

    write_report(report, output, tuple(used))
    return run.exit_code


def register(app: typer.Typer) -> None:
    app.command("probe-script")(probe_script)
    app.command("analyze")(analyze)
