"""Shell completion: the callbacks for --host and --format, and bash's script (values with `:` and `/`).

The callbacks run only when the shell asks (_BSDCRYPT_COMPLETE set): their imports stay inside them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import typer


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


BENCH_FORMATS_HELP = {
    "table": "aligned text and bars (the default)",
    "json": "the record, or the document of the job (docs/bench.md)",
    "yaml": "the same as YAML",
    "prometheus": "node_exporter textfile collector",
    "html": "one self-contained page charting the run(s)",
}


def _matching(table: dict[str, str], incomplete: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in table.items() if k.startswith(incomplete)]


def complete_format(incomplete: str) -> list[tuple[str, str]]:
    return _matching(STATUS_FORMATS_HELP, incomplete)


def complete_fleet_format(incomplete: str) -> list[tuple[str, str]]:
    return _matching(FLEET_FORMATS_HELP, incomplete)


def bench_format_completion(formats: tuple[str, ...]) -> Callable[[str], list[tuple[str, str]]]:
    """--format of one bench job: the formats it has (cleanup no html, userland no prometheus ...)."""
    table = {k: v for k, v in BENCH_FORMATS_HELP.items() if k in formats}

    def complete(incomplete: str) -> list[tuple[str, str]]:
        return _matching(table, incomplete)

    return complete


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
