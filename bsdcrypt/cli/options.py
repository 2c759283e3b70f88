"""What the commands share: the --host/--format/--timeout/--output options, one-line failure, writing a report."""

from __future__ import annotations

import math
import os
from typing import Annotated, Any, Literal, NoReturn

import typer
import typer.core

from bsdcrypt.cli.completion import complete_fleet_format, complete_format, complete_host

# How typer renders help; the app is made with it (literal_help must know).
MARKUP_MODE: Literal["rich"] = "rich"


def literal_help(text: str) -> str:
    """Help text shown as written. typer renders help with rich markup, where `[user@]` is a style
    tag and vanishes; escape such brackets then, and only then (NO_COLOR prints plain click help,
    where a backslash would show)."""
    import re

    if typer.core.HAS_RICH and MARKUP_MODE == "rich" and not os.environ.get("NO_COLOR"):
        return re.sub(r"(?<!\\)\[(?=[a-z#/@][^\[]*?\])", r"\\[", text)
    return text


def nonempty(value: Any) -> Any:
    """Option callback for every path or target option: an empty value (an unset `$MNT` in `-R "$MNT"`)
    is a usage error (exit 3), never "the default" (the live host, the running system, stdout)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    if any(v == "" for v in values):
        raise typer.BadParameter("must not be empty (an unset shell variable?)")
    return value


HostOpt = Annotated[
    str,
    typer.Option(
        "--host",
        "-H",
        help=literal_help("local (default), [user@]host[:port] over SSH, or replay:FILE|NAME for a recording."),
        envvar="BSDCRYPT_HOST",
        metavar="HOST",
        autocompletion=complete_host,
        callback=nonempty,
    ),
]


SSHOpt = Annotated[
    str,
    typer.Option(
        "--ssh",
        help="SSH client for SSH hosts: paramiko (default, in-process) or openssh (the system ssh: certificates, "
        "host CAs, FIDO keys, IdentityAgent).",
        envvar="BSDCRYPT_SSH_CLIENT",
        metavar="CLIENT",
        callback=lambda value: ssh_client(value),
    ),
]


def ssh_client(value: str) -> str:
    """Option callback for --ssh: paramiko or openssh."""
    if value not in ("paramiko", "openssh"):
        raise typer.BadParameter(f"{value!r} is not one of: paramiko, openssh")
    return value


def error_line(message: object) -> str:
    """`bsdcrypt: MESSAGE` as one line of printable text: an error can quote host text (a banner, a
    file name, a host name), shown through the renderers' sanitizer and cut (bsdcrypt.text)."""
    from bsdcrypt.text import MESSAGE_LIMIT, visible

    return f"bsdcrypt: {visible(str(message), MESSAGE_LIMIT)}"


def note(message: str) -> None:
    """`bsdcrypt: MESSAGE` on stderr, a remark rather than an error: on a terminal wrapped to its width
    under a hanging indent; one line anywhere else (a log, a pipe)."""
    import sys

    line = error_line(message)
    try:
        width = os.get_terminal_size(sys.stderr.fileno()).columns if sys.stderr.isatty() else 0
    except (OSError, ValueError):
        width = 0
    if width and len(line) > width:
        from bsdcrypt.render.fit import usable, wrap

        line = "\n".join(wrap(line, usable(width) or width, "", "    "))
    typer.echo(line, err=True)


def fail(message: str, code: int = 3) -> NoReturn:
    """Print a one-line error on stderr and exit."""
    typer.echo(error_line(message), err=True)
    raise typer.Exit(code)


FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help="table, json, yaml, nagios (one line, monitoring-plugins exit codes), prometheus (textfile collector) "
        "or html (one self-contained page).",
        metavar="FORMAT",
        autocompletion=complete_format,
    ),
]

def seconds(value: float) -> float:
    """Option callback: a finite, positive number of seconds (nan and inf slip through click's ranges)."""
    if not math.isfinite(value) or not 0.1 <= value <= 86400:
        raise typer.BadParameter(f"{value} is not a number of seconds between 0.1 and 86400")
    return value


TimeoutOpt = Annotated[
    float, typer.Option("--timeout", help="Seconds allowed for the probe.", callback=seconds, metavar="SECONDS")
]


def check_format(fmt: str, allowed: tuple[str, ...]) -> str:
    if fmt not in allowed:
        fail(f"unknown format {fmt!r}; choose one of: {', '.join(allowed)}")
    return fmt


# fleet-audit and analyze: one row per host
FleetFormatOpt = Annotated[
    str,
    typer.Option(
        "--format", "-f", help="table, json, yaml, csv, prometheus or html.", metavar="FORMAT",
        autocompletion=complete_fleet_format,
    ),
]
OutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the report to FILE (atomically if a regular file; a device or FIFO in place), not stdout.",
        metavar="FILE",
        callback=nonempty,
    ),
]


def text_width(output: str | None = None) -> int | None:
    """The columns a text report may use (docs/output.md, "Width"): None, whole lines, unless it goes
    to a terminal (never with -o FILE, never in a pipe); on a terminal, COLUMNS when it is set to a
    positive number (as ls(1) and ps(1) read it), else the terminal's own width. A pipe ignores
    COLUMNS: programs that use GNU readline export it to everything they start."""
    import sys

    if output not in (None, "-"):
        return None
    try:  # the stream reports go to (under a test runner, its buffer: whole lines)
        if not sys.stdout.isatty():
            return None
        fd = sys.stdout.fileno()
        columns = os.environ.get("COLUMNS", "").strip()
        if columns.isdigit() and int(columns) > 0:
            return int(columns)
        return os.get_terminal_size(fd).columns or None
    except (OSError, ValueError):
        return None


def write_report(text: str, output: str | None, inputs: tuple[str, ...] = ()) -> None:
    """Print a report, or write it to FILE the one way every -o does (bsdcrypt.fsutil: atomically for a
    regular file, in place for a device or FIFO, never over one of the command's inputs; mode 0644)."""
    if output is None or output == "-":
        typer.echo(text, nl=False)
        return
    from bsdcrypt.fsutil import check_output_path, write_file

    check_output_path(output, inputs)
    write_file(output, text, mode=0o644)


def spec_inputs(spec: str) -> tuple[str, ...]:
    """The file a --host value reads (replay:FILE|NAME), which -o must not name; () for live hosts."""
    if not spec.startswith("replay:"):
        return ()
    from bsdcrypt.errors import BsdcryptError
    from bsdcrypt.recording import resolve_recording

    try:
        return (str(resolve_recording(spec[len("replay:"):])),)
    except BsdcryptError:
        return ()  # no such recording: the command says so itself
