"""ssh_config's `Include`, expanded for paramiko's SSHConfig (which has none), and its checked values.

Used where no ssh client is installed (elsewhere `ssh -G` reads the config itself), and once per run
on every path: every file the config includes is read here first, regular files only (a FIFO or a
device named by an Include is one line naming it, where ssh would hang).
"""

from __future__ import annotations

import glob
import os
import re
import shlex

from bsdcrypt.parsers import decimal
from bsdcrypt.ssh.errors import SSHError
from bsdcrypt.ssh.files import read_regular


def _one_word(value: str) -> str | None:
    """The one argument of a keyword, unquoted, a trailing `# comment` dropped (as ssh's argv_split)."""
    try:
        words = shlex.split(value, comments=True)
    except ValueError:
        return None
    return words[0] if len(words) == 1 else None



INCLUDE_MAX_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
USER_CONFIG_DIR = "~/.ssh"
SYSTEM_CONFIG_DIR = "/etc/ssh"


def system_config() -> str:
    """The system-wide client config, ssh_config(5)'s /etc/ssh/ssh_config."""
    return SYSTEM_CONFIG_DIR + "/ssh_config"

# The keyword and its separator only: the value is the rest, right-stripped (a lazy `(.*?)\s*$` for it
# backtracks quadratically over a long blank run inside a line).
_KEYWORD = re.compile(r"\s*(\w+)(?:\s*=\s*|\s+)")
_NO_PARAM = ("all", "canonical", "final")

Clause = tuple[str, str]  # ("host" | "match", the rest of the line)


def _keyword(line: str) -> tuple[str, str] | None:
    """(keyword as written, its value without trailing blanks) of a config line, else None."""
    m = _KEYWORD.match(line)
    return None if m is None else (m.group(1), line[m.end():].rstrip())


def parse_port(value: str) -> int | None:
    """A Port value as ssh takes it (readconf.c, a2port): one decimal number 1-65535; None otherwise."""
    word = _one_word(value)
    if word is None or not (word.isascii() and word.isdigit()):
        return None
    number = decimal(word.lstrip("0") or "0", 5)  # strtonum takes leading zeros
    return number if number is not None and 1 <= number <= 65535 else None


_TIME = re.compile(r"(\d+)([smhdw]?)", re.IGNORECASE)
_TIME_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_INT_MAX = 2**31 - 1


def parse_seconds(value: str) -> int | None:
    """A time value as ssh takes it (misc.c, convtime): numbers with optional units, `90`, `1m30s`; None
    when malformed. ConnectTimeout 0 means no limit, as in ssh."""
    word = _one_word(value)
    if not word or not word.isascii() or _TIME.sub("", word):
        return None
    # convtime refuses a total past INT_MAX (-1: "bad time value"); over 10 digits it is past it already
    total = 0
    for digits, unit in _TIME.findall(word):
        n = decimal(digits.lstrip("0") or "0", 10)
        if n is None:
            return None
        total += n * _TIME_UNITS[unit.lower()]
    return total if total <= _INT_MAX else None


# Values ssh checks when it reads the file, in every block, matching or not: a bad one stops ssh
# ("line N: Bad port"); bsdcrypt refuses the config the same way instead of failing per host.
_CHECKED = {"port": ("port", parse_port), "connecttimeout": ("time value", parse_seconds)}


def _check_value(key: str, value: str, path: str, number: int, where: str = "") -> None:
    what, parse = _CHECKED[key]
    if parse(value) is None:
        shown = value if len(value) <= 40 else value[:39] + "…"
        raise SSHError("config", f"{path} line {number}{where}: bad {what} {shown!r}"
                       + (" (a number 1-65535)" if key == "port" else " (e.g. 30, 1m30s)"))


def _check_lines(lines: list[str], path: str) -> None:
    for number, line in enumerate(lines, start=1):
        kv = _keyword(line)
        if kv is not None and kv[0].lower() in _CHECKED:
            _check_value(kv[0].lower(), kv[1], path, number)


def read_config(path: str, user_config: bool = True) -> str:
    """The text of an ssh_config file with its `Include` directives expanded, for paramiko to parse.

    As in ssh_config(5): each argument of Include is a glob(7) pattern (`~` allowed in user configs
    only); a relative one is taken from ~/.ssh for a user config (including `-F`/--ssh-config) and
    from /etc/ssh for the system one; the matches are read in lexical order; a pattern matching
    nothing is skipped. Include may sit inside a Host or Match block: the included file then applies
    only when that block does (its own Host/Match blocks apply when both match), and after it the
    including block goes on. Includes nest at most 16 deep (OpenSSH's limit). As in readconf.c, a
    match that cannot be opened because it does not exist (a dangling symlink) is skipped; any other
    error stops. Files are bytes to ssh: text that is not UTF-8 (a Latin-1 comment) is read with
    surrogateescape, so every byte survives into the values (`ssh -G` prints them unchanged).

    The expanded text is flat: an included Host/Match block under an outer one becomes one `Match`
    line with both conditions (`Host` patterns as `originalhost`, which is what Host matches), and
    the outer block's line is repeated after the included text. (A repeated `Match` is evaluated
    again there, so a `Match host`/`exec` after an included HostName could differ from ssh, which
    keeps the first result; plain `Host` blocks are unaffected.)
    """
    return "\n".join(_expand(path, user_config, [], 0)) + "\n"


MAX_CONFIG_FILE = 1 << 20  # one ssh config file (each Include's too): real ones are a few KiB


def _read_text(path: str, where: str, missing_ok: bool = False) -> str | None:
    """The text of a config file, every byte kept (surrogateescape); None if it does not exist and
    `missing_ok` (an Include's match: ssh skips ENOENT there)."""
    try:
        data = read_regular(path, MAX_CONFIG_FILE, "ssh config", missing_ok=missing_ok)
    except SSHError as exc:
        raise SSHError("config", f"{exc}{where}") from exc
    if data is None:
        if missing_ok:
            return None
        raise SSHError("config", f"cannot read ssh config {path}{where}: No such file or directory")
    return data.decode("utf-8", errors="surrogateescape")


def _expand(path: str, user_config: bool, outer: list[Clause], depth: int, where: str = "") -> list[str]:
    if depth > INCLUDE_MAX_DEPTH:
        raise SSHError("config", f"ssh config includes nested more than {INCLUDE_MAX_DEPTH} deep{where} "
                       "(an Include loop?)")
    text = _read_text(path, where, missing_ok=depth > 0)
    if text is None:  # an Include's match that does not exist (a dangling symlink): skipped, as ssh does
        return []
    lower = text.lower()
    if depth == 0 and "include" not in lower:
        lines = text.splitlines()
        if "port" in lower or "connecttimeout" in lower:
            _check_lines(lines, path)
        return lines
    out: list[str] = []
    local: Clause | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        kv = _keyword(line)
        if kv is None or line.lstrip().startswith("#"):
            out.append(line)
            continue
        key, value = kv[0].lower(), kv[1]
        if key in _CHECKED:
            _check_value(key, value, path, number, where)
        if key in ("host", "match"):
            local = (key, value)
            out.append(_header(outer + [local], path, number) if outer else line)
            continue
        if key != "include":
            out.append(line)
            continue
        here = f" (Include at {path} line {number})"
        cond = outer + ([local] if local is not None else [])
        try:
            patterns = shlex.split(value, comments=True)
        except ValueError as exc:
            raise SSHError("config", f"{path} line {number}: bad Include: {exc}") from exc
        if not patterns:
            raise SSHError("config", f"{path} line {number}: Include needs a file name")
        included = False
        for pattern in patterns:
            for name in _include_files(pattern, user_config, path, number):
                out += _expand(name, user_config, cond, depth + 1, here)
                included = True
        if included:
            out.append(_header(cond, path, number))  # back in the including block
    return out


def _include_files(pattern: str, user_config: bool, path: str, number: int) -> list[str]:
    if pattern.startswith("~") and not user_config:
        raise SSHError("config", f"{path} line {number}: bad include path {pattern} (~ only in user configs)")
    if not os.path.isabs(pattern) and not pattern.startswith("~"):
        pattern = os.path.join(USER_CONFIG_DIR if user_config else SYSTEM_CONFIG_DIR, pattern)
    pattern = os.path.expanduser(pattern)
    return [p for p in sorted(glob.glob(pattern)) if not os.path.isdir(p)]


def _header(cond: list[Clause], path: str, number: int) -> str:
    """One Host/Match line that matches when every clause of `cond` does."""
    if not cond:
        return "Host *"
    if len(cond) == 1:
        return f"{cond[0][0].capitalize()} {cond[0][1]}"
    criteria: list[str] = []
    for kind, value in cond:
        try:
            tokens = shlex.split(value)
        except ValueError as exc:
            raise SSHError("config", f"{path} line {number}: bad {kind.capitalize()} line: {exc}") from exc
        if kind == "host":
            criteria += ["originalhost", ",".join(tokens)]
            continue
        while tokens:
            word = tokens.pop(0)
            bare = word.lstrip("!").lower()
            if bare in _NO_PARAM:
                if bare != "all":  # `all` AND anything is that thing
                    criteria.append(word)
                continue
            criteria += [word, tokens.pop(0) if tokens else ""]
    return "Match " + (shlex.join(criteria) if criteria else "all")
