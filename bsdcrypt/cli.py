"""The thin typer layer: parse options, call the pipeline, render, exit."""

from __future__ import annotations

import importlib
import math
import os
import sys
from typing import Annotated, Any, NoReturn

import typer

from bsdcrypt import __version__
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.interrupts import Interrupted, sigterm_raises

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
    "userland": "userland",
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


# ---------------------------------------------------------------------------- shell completion
# The callbacks run only when the shell asks (_BSDCRYPT_COMPLETE set): their imports stay inside them.


def _complete_paths(prefix: str, suffixes: tuple[str, ...]) -> list[str]:
    """Directories (with a trailing /) and files ending in one of `suffixes` that start with prefix."""
    head, sep, stem = prefix.rpartition("/")
    typed_dir = head + sep  # "", "/", "dir/", "~/dir/": kept as typed
    folder = os.path.expanduser(typed_dir) if typed_dir else "."
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    out = []
    for name in names:
        if not name.startswith(stem) or (name.startswith(".") and not stem.startswith(".")):
            continue
        if os.path.isdir(os.path.join(folder, name)):
            out.append(f"{typed_dir}{name}/")
        elif name.endswith(suffixes):
            out.append(f"{typed_dir}{name}")
    return out


def complete_host(incomplete: str) -> list[tuple[str, str]]:
    """--host: local, replay:NAME for the shipped recordings, replay:PATH for recording files."""
    out = [("local", "this machine (the default)")] if "local".startswith(incomplete) else []
    if incomplete.startswith("replay:") or "replay:".startswith(incomplete):
        from bsdcrypt.recording import shipped_names

        rest = incomplete[len("replay:"):]
        out += [(f"replay:{n}", "shipped recording") for n in shipped_names() if n.startswith(rest)]
        out += [(f"replay:{p}", "recording file") for p in _complete_paths(rest, (".yaml", ".yml"))]
    return out


STATUS_FORMATS_HELP = {
    "table": "aligned text (the default)",
    "json": "the documented schema (docs/output.md)",
    "yaml": "the same as YAML",
    "nagios": "one monitoring-plugins line, exit 0/1/2/3",
    "prometheus": "node_exporter textfile collector",
    "html": "one self-contained HTML page (docs/output.md)",
}
FLEET_FORMATS_HELP = {
    "table": "one row per host (the default)",
    "json": "the fleet document (docs/fleet.md)",
    "yaml": "the same as YAML",
    "csv": "one flat row per host",
    "prometheus": "node_exporter textfile collector",
    "html": "one self-contained HTML page: charts, sortable table, details",
}


def complete_format(incomplete: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in STATUS_FORMATS_HELP.items() if k.startswith(incomplete)]


def complete_fleet_format(incomplete: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in FLEET_FORMATS_HELP.items() if k.startswith(incomplete)]


# typer's bash script plus: no space after a value that is not finished (`replay:`, a directory).
BASH_COMPLETION_SCRIPT = """
%(complete_func)s() {
    local IFS=$'\\n'
    COMPREPLY=( $( env COMP_WORDS="${COMP_WORDS[*]}" \\
                   COMP_CWORD=$COMP_CWORD \\
                   %(autocomplete_var)s=complete_bash $1 ) )
    if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == */ ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}

complete -o default -F %(complete_func)s %(prog_name)s
"""


def _join_colon_words(words: list[str], cword: int) -> tuple[list[str], int]:
    """bash splits words at the colons and equals signs of COMP_WORDBREAKS (`replay:NAME` arrives as
    `replay`, `:`, `NAME`; `--format=nag` as `--format`, `=`, `nag`): glue them back up to the cursor's
    word; return the words and the cursor's index."""
    words = words + [""] * (cword + 1 - len(words))  # an empty current word does not survive the split
    out: list[str] = []
    glue = False
    for word in words[: cword + 1]:
        colons = bool(word) and set(word) <= {":", "="}
        if out and (colons or glue):  # an empty word after a colon or `=` is the cursor on it
            out[-1] += word
        else:
            out.append(word)
        glue = colons
    return out, len(out) - 1


def _bash_completion_support() -> None:
    """Register bash completion that understands `replay:NAME` (call after typer's own setup)."""
    from typer import _completion_classes as classes

    split = classes.click_split_arg_string

    class ColonBashComplete(classes.BashComplete):
        prefix = ""

        def get_completion_args(self) -> tuple[list[str], str]:
            words, cword = _join_colon_words(split(os.environ["COMP_WORDS"]), int(os.environ["COMP_CWORD"]))
            incomplete = words[cword]
            # bash replaces only the text after the last colon or `=`: print the rest of each value
            # (bash-completion's __ltrim_colon_completions). click takes `--opt=VALUE` apart itself
            # and completes VALUE, so the prefix is of VALUE alone.
            value = incomplete
            if value.startswith("-") and "=" in value:
                value = value.partition("=")[2]
            cut = max(value.rfind(":"), value.rfind("="))
            self.prefix = value[: cut + 1] if cut >= 0 else ""
            return words[1:cword], incomplete

        def format_completion(self, item: Any) -> str:
            value = str(item.value)
            return value[len(self.prefix):] if self.prefix and value.startswith(self.prefix) else value

    classes.add_completion_class(ColonBashComplete, "bash")


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


def _check_format(fmt: str, allowed: tuple[str, ...]) -> str:
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

def host_failure(exc: BsdcryptError) -> tuple[str, str]:
    """(finding id, remedy) of a host `status` could not assess: `host-<kind>` with the kinds and
    remedies of fleet-audit's `fleet-<kind>` (refused, timeout, no-ssh, auth, hostkey-*, garbage...),
    `host-error` when the error names no kind (e.g. a recording that cannot be read)."""
    from bsdcrypt.errors import HostError, ProbeError, kind_of, status_remedy

    kind = "garbage" if isinstance(exc, ProbeError) else kind_of(exc)
    remedy = status_remedy(kind) if isinstance(exc, (HostError, ProbeError)) else None
    if remedy:
        return f"host-{kind}", remedy
    return "host-error", status_remedy("error") or ""


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
    """List the recordings shipped with bsdcrypt, one line each: NAME and what it shows (use --host replay:NAME)."""
    from bsdcrypt.recording import description, shipped

    rows = shipped()
    width = max((len(name) for name, _ in rows), default=0)
    for name, path in rows:
        text = description(path)
        typer.echo(f"{name:<{width}}  {text}".rstrip() if text else name)


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


COMPLETE_VAR = "_BSDCRYPT_COMPLETE"
_SCRIPT_OPTIONS = ("--show-completion", "--install-completion")


def _completion_script_request(argv: list[str]) -> None:
    """`--show-completion` / `--install-completion`: our bash script, and a shell typer has no script
    for (sh, tcsh, ...) is a one-line error with exit 3, not typer's exit 1."""
    root_options = []
    for arg in argv[1:]:
        if not arg.startswith("-"):
            break
        root_options.append(arg.partition("=")[0])
    if not any(a in _SCRIPT_OPTIONS for a in root_options):
        return
    try:
        from typer import _completion_shared as shared

        scripts = shared._completion_scripts
        detect = shared._get_shell_name
    except (ImportError, AttributeError):  # another typer layout: leave it to typer
        return
    scripts["bash"] = BASH_COMPLETION_SCRIPT
    if os.environ.get("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"):
        return  # typer then takes the shell as the option's value
    shell = detect()
    if shell not in scripts:
        what = f"not for {shell}" if shell else "and this shell could not be detected"
        typer.echo(f"bsdcrypt: shell completion exists for bash, zsh, fish and PowerShell, {what}", err=True)
        sys.exit(3)


def _run_app() -> object:
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
    _no_color()
    _register_commands(sys.argv)
    _completion_script_request(sys.argv)
    code = 0
    try:
        # SIGTERM raises Interrupted("SIGTERM") like Ctrl-C, so the same close paths run (an SSH host's
        # close kills its ProxyCommand's process group, which no terminal signal reaches); it is noted
        # in `terminated` too, as typer turns a KeyboardInterrupt into a quiet exit 130.
        with sigterm_raises() as terminated:
            result = _run_app()
        code = result if isinstance(result, int) else 0
        if terminated and code == 130:  # our SIGTERM, as typer reports an interrupt
            typer.echo("bsdcrypt: interrupted by SIGTERM", err=True)
            code = 143  # 128 + SIGTERM, as a shell reports a command killed by it
    except BsdcryptError as exc:
        typer.echo(f"bsdcrypt: {exc}", err=True)
        code = 3
    except KeyboardInterrupt as exc:
        if _is_sigterm(exc):
            typer.echo("bsdcrypt: interrupted by SIGTERM", err=True)
            code = 143  # 128 + SIGTERM, as a shell reports a command killed by it
        else:
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
    sys.exit(code)
