"""The app: main() (exit codes, signals, usage errors) and registering each command's module when it runs."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated

import typer

from bsdcrypt import __version__, started
from bsdcrypt.cli.completion import COMPLETE_VAR, _bash_completion_support, _completion_script_request
from bsdcrypt.cli.options import (  # noqa: F401  (their old home)
    MARKUP_MODE,
    FleetFormatOpt,
    FormatOpt,
    HostOpt,
    OutputOpt,
    TimeoutOpt,
    error_line,
    fail,
    literal_help,
    nonempty,
    seconds,
    spec_inputs,
    write_report,
)
from bsdcrypt.cli.status import host_failure  # noqa: F401  (its old home)
from bsdcrypt.cli.status import register as register_core_commands
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.interrupts import Interrupted, sigterm_raises

app = typer.Typer(
    name="bsdcrypt",
    rich_markup_mode=MARKUP_MODE,
    help="Get FreeBSD-family hosts onto hardware-accelerated kernel crypto (aesni, armv8crypto, ossl).",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

# Commands defined in bsdcrypt/cli/<module>.py, which adds them with register(app). A module is
# imported only when one of its commands runs (or for help and completion): start-up time of `status`.
COMMAND_MODULES: dict[str, str] = {
    "enable": "enable",
    "disable": "enable",
    "bench": "bench",
    "fleet-audit": "fleet",
    "analyze": "analyze",
    "probe-script": "analyze",
    "userland": "userland",
}
CORE_COMMANDS = frozenset({"status", "record", "recordings"})
_registered: set[str] = set()
register_core_commands(app)  # status, record, recordings: always there



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
        from bsdcrypt.hosts.verbose import enable

        enable()


def register_commands(argv: list[str] | None = None) -> None:
    """Register the commands of bsdcrypt/cli/<module>.py: only the one `argv` asks for, else all of them."""
    wanted = next((a for a in (argv or [])[1:] if not a.startswith("-")), None)
    if wanted in CORE_COMMANDS:
        return
    modules = [COMMAND_MODULES[wanted]] if wanted in COMMAND_MODULES else list(dict.fromkeys(COMMAND_MODULES.values()))
    for name in modules:
        if name not in _registered:
            _registered.add(name)
            importlib.import_module(f"bsdcrypt.cli.{name}").register(app)


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


def reflow(doc: str) -> str:
    """A docstring as help shows it: each paragraph on one line, so that rich (which keeps a docstring's
    line breaks) and click both wrap it at the terminal's width instead of at the source's."""
    import inspect

    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


def _reflow_help() -> None:
    groups = [g.typer_instance for g in app.registered_groups if g.typer_instance is not None]  # bench's jobs
    for info in [*app.registered_commands, *(c for g in groups for c in g.registered_commands)]:
        if info.callback is not None and info.callback.__doc__:
            info.callback.__doc__ = reflow(info.callback.__doc__)


def _run_app() -> object:
    _reflow_help()
    # standalone_mode=False: usage errors come back to us, to exit 3 (unknown) with one line,
    # as monitoring plugins do, instead of click's exit 2 (which would read as CRITICAL).
    if not os.environ.get(COMPLETE_VAR):
        return app(prog_name="bsdcrypt", standalone_mode=False)  # also under python -m bsdcrypt
    # The shell asks for completions: typer registers its own completion classes while building the
    # command, so ours for bash goes in after that.
    command = typer.main.get_command(app)
    try:
        _bash_completion_support()
    except (ImportError, AttributeError):  # another typer layout: its own bash completion
        pass
    return command(prog_name="bsdcrypt", standalone_mode=False)


def _is_sigterm(exc: BaseException | None) -> bool:
    return isinstance(exc, Interrupted) and exc.signame == "SIGTERM"


def main() -> None:
    from bsdcrypt.fsutil import GuardedStdout, OutputError, give_up_stdout

    _no_color()
    register_commands(sys.argv)
    _completion_script_request(sys.argv)
    # Every write to stdout goes through the guard: a full disk or a closed pipe is one line and its
    # own exit status (bsdcrypt.fsutil), not click's exit 1 (= warning) or a traceback.
    sys.stdout = GuardedStdout(sys.stdout)
    started()  # from here on Ctrl-C is a KeyboardInterrupt: the close paths run
    try:
        code = _run_and_report()
    except OutputError as exc:  # while reporting an error (the Nagios line of a usage error)
        give_up_stdout()
        typer.echo(error_line(exc), err=True)
        code = exc.exit_code
    sys.exit(code)


def _run_and_report() -> int:
    """Run the command; every way it can end, as an exit status (and one line on stderr)."""
    from bsdcrypt.fsutil import OutputError, give_up_stdout

    code = 0
    try:
        # SIGTERM raises Interrupted("SIGTERM") like Ctrl-C, so the same close paths run (an SSH host's
        # close kills its ProxyCommand's process group, which no terminal signal reaches); it is noted
        # in `terminated` too, as typer turns a KeyboardInterrupt into a quiet exit 130.
        with sigterm_raises() as terminated:
            result = _run_app()
            sys.stdout.flush()
        code = result if isinstance(result, int) else 0
        if terminated and code == 130:  # our SIGTERM, as typer reports an interrupt
            typer.echo("bsdcrypt: interrupted by SIGTERM", err=True)
            code = 143  # 128 + SIGTERM, as a shell reports a command killed by it
    except OutputError as exc:
        give_up_stdout()
        typer.echo(error_line(exc), err=True)
        code = exc.exit_code
    except BsdcryptError as exc:
        typer.echo(error_line(exc), err=True)
        code = 3
    except KeyboardInterrupt as exc:
        if _is_sigterm(exc):
            typer.echo("bsdcrypt: interrupted by SIGTERM", err=True)
            code = 143  # 128 + SIGTERM, as a shell reports a command killed by it
        else:
            typer.echo("bsdcrypt: interrupted", err=True)
            code = 130
    except ImportError as exc:  # a dependency left out of the installation: one line naming it
        from bsdcrypt.cli.deps import EXIT_MISSING, missing_line

        line = missing_line(exc)
        if line is None:
            raise
        typer.echo(line, err=True)
        code = EXIT_MISSING
    except Exception as exc:
        if _is_click(exc, "NoArgsIsHelpError"):
            pass  # `bsdcrypt` alone: the help was printed
        elif _is_click(exc, "UsageError"):
            ctx = getattr(exc, "ctx", None)
            where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            message = f"{exc.format_message()}{where}"  # type: ignore[attr-defined]
            typer.echo(error_line(message), err=True)
            if requested_format(sys.argv) == "nagios":  # a plugin's line goes to stdout, usage errors included
                typer.echo(f"BSDCRYPT UNKNOWN: {' '.join(message.replace('|', '/').split())}")
            code = 3
        elif _is_click(exc, "Abort"):  # click turns KeyboardInterrupt (ours for SIGTERM too) into Abort
            if _is_sigterm(exc.__cause__):
                typer.echo("bsdcrypt: interrupted by SIGTERM", err=True)
                code = 143
            else:
                typer.echo("bsdcrypt: interrupted", err=True)
                code = 130
        elif _is_click(exc, "ClickException"):
            typer.echo(f"bsdcrypt: {exc.format_message()}", err=True)  # type: ignore[attr-defined]
            code = 3
        else:
            raise
    return code
