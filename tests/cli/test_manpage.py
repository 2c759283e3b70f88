"""docs/bsdcrypt.8: mdoc lint with mandoc, the FreeBSD sections, and consistency with --help.

Every command of `bsdcrypt --help` and every option of `bsdcrypt CMD --help` must be in the man
page: each command's options in its SYNOPSIS line, and no option there that the command lacks.
mandoc missing: skip, unless BSDCRYPT_REQUIRE_MANDOC=1 (CI), then fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
MAN = ROOT / "docs" / "bsdcrypt.8"
OPTION = re.compile(r"(?<![\w-])--?[a-zA-Z][\w-]*")


def _mandoc() -> str:
    path = shutil.which("mandoc")
    if path:
        return path
    if os.environ.get("BSDCRYPT_REQUIRE_MANDOC") == "1":
        pytest.fail("BSDCRYPT_REQUIRE_MANDOC=1 but mandoc is not installed (apt install mandoc)")
    pytest.skip("mandoc not installed")


@cache
def _help(*args: str) -> str:
    r = run_cli(*args, "--help", env={"NO_COLOR": "1", "COLUMNS": "100"}, check=True)
    return r.stdout


def _section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(f"{title}:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


@cache
def help_commands(*group: str) -> tuple[str, ...]:
    """The commands of `bsdcrypt --help`; a command with subcommands (`bench`) stands for each of them
    (`bench geli`, `bench userland` ...), as the man page's SYNOPSIS lists them."""
    out: list[str] = []
    for line in _section(_help(*group), "Commands"):
        if re.match(r"^  \S", line):
            name = " ".join([*group, line.split()[0]])
            text = _help(*name.split())
            out += help_commands(*name.split()) if "\nCommands:\n" in text else [name]
    return tuple(out)


@cache
def help_option_groups(*command: str) -> frozenset[frozenset[str]]:
    """The options listed in `bsdcrypt [CMD] --help` (first column of the Options section), as groups
    of the forms of one option: {-H, --host}, {--read, --no-read}."""
    groups: set[frozenset[str]] = set()
    for line in _section(_help(*command), "Options"):
        if re.match(r"^  -", line):
            forms = frozenset(OPTION.findall(re.split(r"\s{2,}", line.strip())[0]))
            if forms != {"--help"}:
                groups.add(forms)
    return frozenset(groups)


def help_options(*command: str) -> frozenset[str]:
    return frozenset(o for g in help_option_groups(*command) for o in g)


@cache
def rendered() -> str:
    r = subprocess.run([_mandoc(), "-Tascii", "-O", "width=400", str(MAN)], capture_output=True, text=True,
                       check=True, timeout=60)
    return re.sub(r".\x08", "", r.stdout)


def synopsis() -> dict[str, str]:
    """command -> its SYNOPSIS line (rendered), short flag groups like -npy expanded."""
    text = rendered()
    block = text[text.index("SYNOPSIS\n"):text.index("\nDESCRIPTION\n")]
    out: dict[str, str] = {}
    for line in block.splitlines():
        m = re.match(r"^\s+bsdcrypt (?:\[-v\] )?([a-z][\w-]*(?: (?:geli|userland|cleanup|compare))?)(.*)$", line)
        if m and m.group(1) != "command":  # the generic "bsdcrypt [-v] command [options]"
            rest = re.sub(r"\[-([a-zA-Z]{2,})\]", lambda g: " ".join(f"[-{c}]" for c in g.group(1)), m.group(2))
            out[m.group(1)] = rest
    return out


def test_mandoc_lint_is_clean() -> None:
    r = subprocess.run([_mandoc(), "-Tlint", "-W", "style", str(MAN)], capture_output=True, text=True,
                       timeout=60, check=False)
    # FreeBSD's own manuals (aesni(4), geli(8), ...) are not installed on Linux: only that is allowed.
    problems = [line for line in (r.stdout + r.stderr).splitlines()
                if line and "referenced manual not found" not in line and "mandoc.db" not in line]
    assert problems == []
    strict = subprocess.run([_mandoc(), "-Tlint", "-W", "warning", str(MAN)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert strict.returncode == 0, strict.stdout + strict.stderr


def test_freebsd_sections_and_see_also() -> None:
    text = rendered()
    headings = re.findall(r"^([A-Z][A-Z ]+)$", text, re.M)
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES",
                    "SEE ALSO"):
        assert section in headings
    assert headings.index("EXIT STATUS") < headings.index("EXAMPLES") < headings.index("SEE ALSO")
    see_also = text[text.index("\nSEE ALSO\n"):]
    for ref in ("aesni(4)", "geli(8)", "loader.conf(5)", "kldstat(8)", "sysrc(8)"):
        assert ref in see_also
    source = MAN.read_text()
    assert source.count(".Dt BSDCRYPT 8\n") == 1 and ".Os\n" in source


@pytest.mark.slow
def test_help_parsing_sees_what_the_cli_defines() -> None:
    """The --help scraping below must match the real command tree, or the consistency test is void."""
    import typer

    from bsdcrypt import cli

    cli.register_commands()
    root = typer.main.get_command(cli.app)
    leaves = {f"{name} {sub}" if sub else name: c
              for name, command in root.commands.items()  # type: ignore[attr-defined]
              for sub, c in (getattr(command, "commands", None) or {"": command}).items()}
    assert set(help_commands()) == set(leaves)
    for name, command in leaves.items():
        defined = {o for p in command.params if p.param_type_name == "option" for o in (*p.opts, *p.secondary_opts)}
        assert help_options(*name.split()) == defined - {"--help"}, name


@pytest.mark.slow
def test_every_command_and_option_of_help_is_in_the_man_page() -> None:
    syn = synopsis()
    assert set(syn) == set(help_commands())
    text = rendered()
    description = text[text.index("\nDESCRIPTION\n"):text.index("\nENVIRONMENT\n")]
    for opt in help_options():
        assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", description), f"global option {opt}"
    for command in help_commands():
        assert re.search(rf"^\s+{re.escape(command)}\s", description, re.M), f"{command} not described"
        in_synopsis = set(OPTION.findall(syn[command]))
        missing = [sorted(g) for g in help_option_groups(*command.split()) if not g & in_synopsis]
        assert not missing, f"{command}: {missing} missing from the SYNOPSIS (short or long form)"
        stale = in_synopsis - help_options(*command.split())
        assert not stale, f"{command}: {sorted(stale)} in the SYNOPSIS but not in --help"
        for opt in help_options(*command.split()):  # described somewhere, not only listed
            assert len(re.findall(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", description)) >= 1, (command, opt)
