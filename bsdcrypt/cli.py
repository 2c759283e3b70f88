"""The thin typer layer: parse options, call the pipeline, render, exit."""

from __future__ import annotations

import importlib
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

# Modules under bsdcrypt/commands that add their commands with register(app).
COMMAND_MODULES: tuple[str, ...] = ()

HostOpt = Annotated[
    str,
    typer.Option(
        "--host",
        "-H",
        help="local (default), [user@]host[:port] over SSH, or replay:FILE|NAME for a recording.",
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
) -> None:
    """bsdcrypt: status, enable, bench and fleet-audit for kernel AES acceleration."""


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"bsdcrypt.commands.{name}").register(app)


def main() -> None:
    _register_commands()
    try:
        app()
    except BsdcryptError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        typer.echo("bsdcrypt: interrupted", err=True)
        sys.exit(130)
