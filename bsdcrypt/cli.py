"""The thin typer layer: parse options, call the pipeline, render, exit."""

from __future__ import annotations

import importlib
import math
import os
import sys
from typing import Annotated, NoReturn

import typer

from bsdcrypt import __version__
from bsdcrypt.errors import BsdcryptError

app = typer.Typer(
    name="bsdcrypt",
    help="Get FreeBSD-family hosts onto hardware-accelerated kernel crypto (aesni, armv8crypto, ossl).",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

# Commands defined in bsdcrypt/commands/<module>.py, which adds them with register(app). A module is
# imported only when one of its commands runs (or for help and completion): start-up time of `status`.
COMMAND_MODULES: dict[str, str] = {
    "enable": "enable",
    "disable": "enable",
    "bench": "bench",
    "fleet-audit": "fleet",
    "analyze": "analyze",
    "probe-script": "analyze",
}
CORE_COMMANDS = frozenset({"status", "record", "recordings"})
_registered: set[str] = set()



def literal_help(text: str) -> str:
    """Help text shown as written. typer renders help with rich markup, where `[user@]` is a style
    tag and vanishes; escape such brackets then, and only then (NO_COLOR prints plain click help,
    where a backslash would show)."""
    import re

    import typer.core

    if typer.core.HAS_RICH and getattr(app, "rich_markup_mode", None) == "rich" and not os.environ.get("NO_COLOR"):
        return re.sub(r"(?<!\\)\[(?=[a-z#/@][^\[]*?\])", r"\\[", text)
    return text


HostOpt = Annotated[
    str,
    typer.Option(
        "--host",
        "-H",
        help=literal_help("local (default), [user@]host[:port] over SSH, or replay:FILE|NAME for a recording."),
        envvar="BSDCRYPT_HOST",
    ),
]


def fail(message: str, code: int = 3) -> NoReturn:
    """Print a one-line error on stderr and exit."""
    typer.echo(f"bsdcrypt: {message}", err=True)
    raise typer.Exit(code)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"bsdcrypt {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Show the version.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show the commands run on each host, on stderr.")
    ] = False,
) -> None:
    """bsdcrypt: status, enable, bench and fleet-audit for kernel AES acceleration."""
    if verbose:
        from bsdcrypt.verbose import enable

        enable()


FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help="table, json, yaml, nagios (one line, monitoring-plugins exit codes) or prometheus (textfile collector).",
    ),
]
def seconds(value: float) -> float:
    """Option callback: a finite, positive number of seconds (nan and inf slip through click's ranges)."""
    if not math.isfinite(value) or not 0.1 <= value <= 86400:
        raise typer.BadParameter(f"{value} is not a number of seconds between 0.1 and 86400")
    return value


TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds allowed for the probe.", callback=seconds)]


def _check_format(fmt: str, allowed: tuple[str, ...]) -> str:
    if fmt not in allowed:
        fail(f"unknown format {fmt!r}; choose one of: {', '.join(allowed)}")
    return fmt


# fleet-audit and analyze: one row per host
FleetFormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, json, yaml, csv or prometheus.")]
OutputOpt = Annotated[
    str | None,
    typer.Option("--output", "-o", help="Write the report to FILE atomically (e.g. DIR/bsdcrypt.prom), not stdout."),
]


@app.command()
def status(
    host: HostOpt = "local", fmt: FormatOpt = "table", timeout: TimeoutOpt = 120.0, output: OutputOpt = None
) -> None:
    """Is kernel AES acceleration available, active and persisted here, and what to do.

    Exit status: 0 OK, 1 warning (action recommended), 2 critical, 3 unknown or error.
    """
    from bsdcrypt.host import parse_host_spec
    from bsdcrypt.pipeline import status_of
    from bsdcrypt.report import FORMATS, render

    _check_format(fmt, FORMATS)
    try:
        result = status_of(parse_host_spec(host), timeout=timeout)
    except BsdcryptError as exc:
        if fmt not in MONITORING_FORMATS:
            raise
        # Monitoring always gets its report, errors included: a Nagios line on stdout, and a textfile
        # that says "unknown" instead of the last good run's metrics going stale.
        from bsdcrypt.status import error_status

        message = " ".join(str(exc).split())
        finding_id, remedy = host_failure(exc)
        result = error_status(host, host, finding_id, message, remedy)
    write_report(render(result, fmt), output)
    raise typer.Exit(result.exit_code)


MONITORING_FORMATS = ("nagios", "prometheus")

# Remedies where fleet-audit's do not fit a single `status` run (it has no --accept-new).
_STATUS_REMEDIES = {
    "hostkey-unknown": (
        "Verify the key's fingerprint with the host's admin, then add it to known_hosts "
        "(`ssh HOST` once, or `bsdcrypt fleet-audit --accept-new`)."
    ),
    "error": "Run `bsdcrypt status` by hand to see the error.",
}


def host_failure(exc: BsdcryptError) -> tuple[str, str]:
    """(finding id, remedy) of a host `status` could not assess: `host-<kind>` with the kinds and
    remedies of fleet-audit's `fleet-<kind>` (refused, timeout, no-ssh, auth, hostkey-*, garbage...),
    `host-error` when the error names no kind (e.g. a recording that cannot be read)."""
    from bsdcrypt.errors import HostError, ProbeError

    kind = "garbage" if isinstance(exc, ProbeError) else getattr(exc, "kind", None)
    if isinstance(exc, (HostError, ProbeError)) and isinstance(kind, str):
        from bsdcrypt.fleet import REMEDIES

        remedy = _STATUS_REMEDIES.get(kind) or REMEDIES.get(kind)
        if remedy:
            return f"host-{kind}", remedy
    return "host-error", _STATUS_REMEDIES["error"]


def write_report(text: str, output: str | None) -> None:
    """Print a report, or write it atomically (temp file in the same directory + rename, mode 0644)."""
    if output is None or output == "-":
        typer.echo(text, nl=False)
        return
    from bsdcrypt.fsutil import atomic_write_text

    atomic_write_text(output, text, mode=0o644)


@app.command()
def record(
    output: Annotated[str, typer.Option("--output", "-o", help="File to write, or - for stdout.")],
    host: HostOpt = "local",
    redact: Annotated[bool, typer.Option("--redact", help="Replace hostname, MAC addresses, serials.")] = False,
    timeout: TimeoutOpt = 120.0,
) -> None:
    """Save what the probe gathers on a host as a YAML recording (docs/recordings.md)."""
    from bsdcrypt.host import parse_host_spec
    from bsdcrypt.pipeline import gather_evidence
    from bsdcrypt.recording import dump
    from bsdcrypt.recording import redact as redact_evidence

    target = parse_host_spec(host)
    evidence = gather_evidence(target, timeout=timeout)
    name = target.name
    if redact:
        evidence = redact_evidence(evidence, name)
        name = "host.example"
    text = dump(evidence, name, redacted=redact)
    if output == "-":
        typer.echo(text, nl=False)
        return
    from bsdcrypt.fsutil import atomic_write_text

    atomic_write_text(output, text)
    typer.echo(f"recorded {len(evidence.steps)} probe steps of {name} to {output}", err=True)


@app.command()
def recordings() -> None:
    """List the recordings shipped with bsdcrypt (use them as --host replay:NAME)."""
    from bsdcrypt.recording import shipped_names

    for name in shipped_names():
        typer.echo(name)


def _register_commands(argv: list[str] | None = None) -> None:
    """Register the commands of bsdcrypt/commands: only the one `argv` asks for, else all of them."""
    wanted = next((a for a in (argv or [])[1:] if not a.startswith("-")), None)
    if wanted in CORE_COMMANDS:
        return
    modules = [COMMAND_MODULES[wanted]] if wanted in COMMAND_MODULES else list(dict.fromkeys(COMMAND_MODULES.values()))
    for name in modules:
        if name not in _registered:
            _registered.add(name)
            importlib.import_module(f"bsdcrypt.commands.{name}").register(app)


def _no_color() -> None:
    """NO_COLOR (https://no-color.org) set and not empty: plain help and errors, no ANSI escapes
    (rich alone would still print bold and dim)."""
    if os.environ.get("NO_COLOR"):
        import typer.core

        typer.core.HAS_RICH = False


def _is_click(exc: BaseException, name: str) -> bool:
    """click's exception classes by name: typer < 0.26 uses click, later typer vendors it."""
    return any(c.__name__ == name for c in type(exc).__mro__)


# Options of status whose value is the next argument (so a host or file named "nagios" is not a format).
_VALUE_OPTIONS = frozenset({"-H", "--host", "-o", "--output", "--timeout", "--token"})


def requested_format(argv: list[str]) -> str | None:
    """The value of the last -f/--format in argv, in all of click's spellings (`-f X`, `-fX`,
    `--format X`, `--format=X`), read without click: usage errors are reported before click has
    parsed anything. None if there is none."""
    fmt: str | None = None
    args = iter(argv[1:])
    for arg in args:
        if arg == "--":
            break
        if arg in ("-f", "--format"):
            fmt = next(args, None)
        elif arg.startswith("--format="):
            fmt = arg.partition("=")[2]
        elif arg.startswith("-f") and not arg.startswith("--"):
            fmt = arg[2:]
        elif arg in _VALUE_OPTIONS:
            next(args, None)
    return fmt


def main() -> None:
    _no_color()
    _register_commands(sys.argv)
    code = 0
    try:
        # standalone_mode=False: usage errors come back to us, to exit 3 (unknown) with one line,
        # as monitoring plugins do, instead of click's exit 2 (which would read as CRITICAL).
        result = app(prog_name="bsdcrypt", standalone_mode=False)  # also under python -m bsdcrypt
        code = result if isinstance(result, int) else 0
    except BsdcryptError as exc:
        typer.echo(f"bsdcrypt: {exc}", err=True)
        code = 3
    except KeyboardInterrupt:
        typer.echo("bsdcrypt: interrupted", err=True)
        code = 130
    except Exception as exc:
        if _is_click(exc, "NoArgsIsHelpError"):
            pass  # `bsdcrypt` alone: the help was printed
        elif _is_click(exc, "UsageError"):
            ctx = getattr(exc, "ctx", None)
            where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            message = f"{exc.format_message()}{where}"  # type: ignore[attr-defined]
            typer.echo(f"bsdcrypt: {message}", err=True)
            if requested_format(sys.argv) == "nagios":  # a plugin's line goes to stdout, usage errors included
                typer.echo(f"BSDCRYPT UNKNOWN: {' '.join(message.replace('|', '/').split())}")
            code = 3
        elif _is_click(exc, "Abort"):
            typer.echo("bsdcrypt: interrupted", err=True)
            code = 130
        elif _is_click(exc, "ClickException"):
            typer.echo(f"bsdcrypt: {exc.format_message()}", err=True)  # type: ignore[attr-defined]
            code = 3
        else:
            raise
    sys.exit(code)
