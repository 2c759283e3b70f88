"""`bsdcrypt fleet-audit HOSTS_FILE`: every host of a fleet over SSH (or from recordings)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from bsdcrypt.cli.options import FleetFormatOpt, OutputOpt, SSHOpt, error_line, literal_help, nonempty, seconds

if TYPE_CHECKING:
    from bsdcrypt.hostsfile import HostEntry

FORMATS = ("table", "json", "yaml", "csv", "prometheus", "html")


def fleet_audit(
    hosts_file: Annotated[
        str,
        typer.Argument(
            help=literal_help("One [user@]host[:port] or replay:PATH per line; - reads stdin."),
            metavar="HOSTS_FILE",
            callback=nonempty,
        ),
    ],
    parallel: Annotated[
        int | None,
        typer.Option(
            "--parallel", "-j", min=1, metavar="N", help="Hosts at once (default 32, capped by the open-file limit)."
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", "-t", callback=seconds, metavar="SECONDS", help="Seconds per host for connect + auth + probe."
        ),
    ] = 30.0,
    ssh_config: Annotated[
        str | None,
        typer.Option(
            "--ssh-config", "-F", help="OpenSSH client config to use instead of ~/.ssh/config.", metavar="FILE",
            callback=nonempty,
        ),
    ] = None,
    accept_new: Annotated[
        bool,
        typer.Option(
            "--accept-new", help="Add unknown host keys to known_hosts (changed keys are always errors)."
        ),
    ] = False,
    ssh: SSHOpt = "paramiko",
    fmt: FleetFormatOpt = "table",
    output: OutputOpt = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar, no notes on stderr.")
    ] = False,
) -> None:
    """Audit every host of a hosts file; hosts needing action come first.

    Exit status: the worst host's (0 OK, 1 warning, 2 critical, 3 unknown or unreachable).
    """
    from bsdcrypt.errors import BsdcryptError
    from bsdcrypt.fleet import FleetInterrupted
    from bsdcrypt.fsutil import OutputError
    from bsdcrypt.hostsfile import HostsFileError
    from bsdcrypt.interrupts import Interrupted, sigterm_raises

    try:
        with sigterm_raises():  # like Ctrl-C: hosts aborted, ProxyCommands killed, exit 143
            code = _fleet_audit(hosts_file, parallel, timeout, ssh_config, accept_new, fmt, output, quiet, ssh)
    except Interrupted as exc:  # Ctrl-C or SIGTERM: no report; what the run had got to
        interrupted = exc if isinstance(exc, FleetInterrupted) else FleetInterrupted(exc.signame)
        typer.echo(f"bsdcrypt: fleet-audit {interrupted.describe()}; no report written", err=True)
        raise typer.Exit(interrupted.exit_code) from None
    except HostsFileError as exc:  # bad lines: one line each, FILE:LINE: problem
        from bsdcrypt.text import MESSAGE_LIMIT, visible

        for line in exc.lines:
            typer.echo(visible(line, MESSAGE_LIMIT), err=True)
        raise typer.Exit(3) from None
    except OutputError:
        raise  # the report could not be delivered: its own exit status (bsdcrypt.cli.main)
    except BsdcryptError as exc:  # a bad ssh config, an unwritable -o: one line, exit 3
        typer.echo(error_line(exc), err=True)
        raise typer.Exit(3) from None
    raise typer.Exit(code)


def _fleet_audit(
    hosts_file: str,
    parallel: int | None,
    timeout: float,
    ssh_config: str | None,
    accept_new: bool,
    fmt: str,
    output: str | None,
    quiet: bool,
    client: str = "paramiko",
) -> int:
    import gc

    from bsdcrypt import fleet
    from bsdcrypt.errors import BsdcryptError
    from bsdcrypt.hostsfile import read_hosts

    if fmt not in FORMATS:
        raise BsdcryptError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    from bsdcrypt.fsutil import read_input
    from bsdcrypt.hostsfile import MAX_HOSTS_FILE

    # Bytes, bounded: a line that is not UTF-8 is a FILE:LINE error like any other bad line.
    data = read_input(hosts_file, MAX_HOSTS_FILE, "hosts file")
    base_dir = os.getcwd() if hosts_file == "-" else os.path.dirname(os.path.abspath(hosts_file))
    entries = read_hosts(data, hosts_file, base_dir)
    inputs = _inputs(hosts_file, ssh_config, entries)
    if output is not None and output != "-":
        from bsdcrypt.fsutil import check_output_path

        check_output_path(output, inputs)  # before the audit, not after it
    options = fleet.FleetOptions(
        parallel=parallel or fleet.default_parallel(),
        timeout=timeout,
        ssh_config=ssh_config,
        accept_new=accept_new,
        client=client,
    )
    auditor = fleet.Auditor(options)
    auditor.prepare(entries, strict=True)  # a bad --ssh-config is one error, not a row per host
    progress = fleet.Progress(len(entries), enabled=None if not quiet else False)
    # paramiko and the assessment make many short-lived objects a host: with the default threshold
    # (700) the cycle collector ran ~180 times in a 500-host run, 0.26-0.30 ms a host; with 20,000
    # ~60 times, 0.19-0.21 ms (measured with gc.callbacks; peak RSS unchanged, 61 MB).
    gc.set_threshold(20_000, 20, 20)
    # Duplicates are what ssh would connect to, not the text: each line's config is looked up by its
    # worker, under the host's deadline (a slow `Match exec` cannot stall the run before it starts).
    run = fleet.run_fleet(entries, options, progress, auditor, dedupe=True)
    if not quiet:
        from bsdcrypt.cli.options import note

        for duplicate in run.duplicates:
            note(f"note: {duplicate}")
    if fmt == "html":
        from bsdcrypt.render.html import fleet_page  # Jinja2: only on this path

        source = "standard input" if hosts_file == "-" else hosts_file
        report = fleet_page(run, title="bsdcrypt fleet audit", source=source, command="fleet-audit")
    else:
        from bsdcrypt.cli.options import text_width
        from bsdcrypt.render.fleet import render

        report = render(run, fmt, text_width(output))
    if output is None or output == "-":
        typer.echo(report, nl=False)
    else:
        from bsdcrypt.cli import write_report

        write_report(report, output, inputs)
        if not quiet:
            typer.echo(f"bsdcrypt: wrote {fmt} report on {len(run.results)} hosts to {output}", err=True)
    return run.exit_code


def _inputs(hosts_file: str, ssh_config: str | None, entries: list[HostEntry]) -> tuple[str, ...]:
    """The files this audit reads, which -o must never name: the hosts file, the ssh config, the
    user's known_hosts (--accept-new writes it) and every recording the hosts file names."""
    from bsdcrypt import fleet
    from bsdcrypt.errors import BsdcryptError

    paths = [hosts_file, os.path.expanduser(ssh_config or "~/.ssh/config")]
    paths += [os.path.expanduser(p) for p in ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")]
    for entry in entries:
        if entry.is_replay:
            try:
                paths.append(str(fleet.replay_path(entry)))
            except BsdcryptError:
                pass  # no such recording: its row says so
    return tuple(paths)


def register(app: typer.Typer) -> None:
    app.command("fleet-audit")(fleet_audit)
