"""What the commands share: the --host/--format/--timeout/--output options, one-line failure, writing a report."""

from __future__ import annotations

import math
import os
from typing import Annotated, Literal, NoReturn

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


HostOpt = Annotated[
    str,
    typer.Option(
        "--host",
        "-H",
        help=literal_help("local (default), [user@]host[:port] over SSH, or replay:FILE|NAME for a recording."),
        envvar="BSDCRYPT_HOST",
        autocompletion=complete_host,
    ),
]


def fail(message: str, code: int = 3) -> NoReturn:
    """Print a one-line error on stderr and exit."""
    typer.echo(f"bsdcrypt: {message}", err=True)
    raise typer.Exit(code)


FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help="table, json, yaml, nagios (one line, monitoring-plugins exit codes), prometheus (textfile collector) "
        "or html (one self-contained page).",
        autocompletion=complete_format,
    ),
]

def seconds(value: float) -> float:
    """Option callback: a finite, positive number of seconds (nan and inf slip through click's ranges)."""
    if not math.isfinite(value) or not 0.1 <= value <= 86400:
        raise typer.BadParameter(f"{value} is not a number of seconds between 0.1 and 86400")
    return value


TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds allowed for the probe.", callback=seconds)]


def check_format(fmt: str, allowed: tuple[str, ...]) -> str:
    if fmt not in allowed:
        fail(f"unknown format {fmt!r}; choose one of: {', '.join(allowed)}")
    return fmt


# fleet-audit and analyze: one row per host
FleetFormatOpt = Annotated[
    str,
    typer.Option(
        "--format", "-f", help="table, json, yaml, csv, prometheus or html.", autocompletion=complete_fleet_format
    ),
]
OutputOpt = Annotated[
    str | None,
    typer.Option("--output", "-o", help="Write the report to FILE atomically (e.g. DIR/bsdcrypt.prom), not stdout."),
]


def write_report(text: str, output: str | None) -> None:
    """Print a report, or write it atomically (temp file in the same directory + rename, mode 0644)."""
    if output is None or output == "-":
        typer.echo(text, nl=False)
        return
    from bsdcrypt.fsutil import atomic_write_text

    atomic_write_text(output, text, mode=0o644)
