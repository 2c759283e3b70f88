"""loader.conf(5) files read exactly the way the FreeBSD lua loader reads them (pure, bytes in).

The model is `stand/lua/config.lua` (`config.parse`, `pattern_table`, `checkPattern`,
`isValidComment`, `readConf`), the default loader since FreeBSD 12.0:

* The text is split on ``\\n`` only (``text:gmatch("([^\\n]+)")``); a CR of a CRLF file stays in the
  line and counts as whitespace (``%s`` is C ``isspace``).
* A line that is only whitespace is ignored; a line whose first non-blank byte is ``#`` is a comment.
* Patterns are tried in order: comment, ``<module>_load|_name|_type|_flags|_before|_after|_error``,
  ``exec``, then any other ``name=value`` (an environment variable).  Each is tried first with a
  double-quoted value ``"(.*)"`` (greedy: up to the *last* ``"`` of the line) and only if that does not
  match with a bare word ``[-%w%d][-%w%d_.]*``.  Whatever follows the value must be blank or a ``#``
  comment, else the line is "Malformed" and the loader skips it (it keeps reading the next lines).
* ``<module>_load`` values are compared case-insensitively with "yes" (``v:upper()``, then
  ``load:lower() == "yes"``).
* File order: ``/boot/loader.conf``, then ``/boot/loader.conf.d/*.conf``, then
  ``/boot/loader.conf.local`` (``local_loader_conf_files``, read last since FreeBSD 14.1, commit
  a25531db0fc2).  The last assignment wins.  The loader reads the directory in readdir order; we sort
  by name, which is what ``ls`` shows and what the probe gathers.  Before 14.1 ``loader.conf.local``
  was part of ``loader_conf_files`` and was read *before* ``loader.conf.d``; `order_ambiguous`
  reports configurations where that difference changes the result.

Everything works on bytes: CRLF, a missing final newline, tabs and non-UTF-8 bytes are kept as they
are.  Names and values are returned as ``str`` decoded with ``surrogateescape``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from bsdcrypt.facts import Assignment

if TYPE_CHECKING:  # pragma: no cover
    from bsdcrypt.probe import Evidence

LOADER_CONF = "/boot/loader.conf"
LOADER_CONF_DIR = "/boot/loader.conf.d"
LOADER_CONF_LOCAL = "/boot/loader.conf.local"

LineKind = Literal["blank", "comment", "assign", "malformed"]

# C isspace() in the loader's libsa: space, \t, \n, \v, \f, \r.
_SP = rb"[ \t\n\v\f\r]*"
_QVAL = rb'"(?P<v>.*)"'  # QVALEXPR '"(.*)"' (greedy)
_WORD = rb"(?P<v>[-A-Za-z0-9][-A-Za-z0-9_.]*)"  # WORDEXPR "([-%w%d][-%w%d_.]*)"
_MODULE_SUFFIXES = ("load", "name", "type", "flags", "before", "after", "error")
_BLANK = re.compile(rb"\A[ \t\n\v\f\r]*\Z")
_COMMENT = re.compile(rb"\A[ \t\n\v\f\r]*#", re.S)
_VALID_TAIL = re.compile(rb"\A[ \t\n\v\f\r]*(?:#.*)?\Z", re.S)  # isValidComment()


def _compile(name_re: bytes, value_re: bytes) -> re.Pattern[bytes]:
    return re.compile(rb"\A" + _SP + name_re + _SP + b"=" + _SP + value_re + _SP + rb"(?P<c>.*)\Z", re.S)


# (quoted pattern, word pattern or None), in pattern_table order after the comment entry.
_PATTERNS: tuple[tuple[re.Pattern[bytes], re.Pattern[bytes] | None], ...] = (
    *(
        (
            _compile(rb"(?P<n>[-A-Za-z0-9_]+_" + sfx.encode() + rb")", _QVAL),
            _compile(rb"(?P<n>[-A-Za-z0-9_]+_" + sfx.encode() + rb")", _WORD),
        )
        for sfx in _MODULE_SUFFIXES
    ),
    (_compile(rb"(?P<n>exec)", _QVAL), None),
    (
        _compile(rb"(?P<n>[A-Za-z0-9][-A-Za-z0-9_.]*)", _QVAL),
        _compile(rb"(?P<n>[A-Za-z0-9][-A-Za-z0-9_.]*)", _WORD),
    ),
)


def _s(raw: bytes) -> str:
    return raw.decode("utf-8", errors="surrogateescape")


@dataclass(frozen=True)
class Line:
    """One physical line of a loader configuration file, as the loader classifies it."""

    number: int  # 1-based
    offset: int  # byte offset of the line in the file
    text: bytes  # without the terminating \n (a CR of CRLF stays here)
    terminated: bool  # followed by \n
    kind: LineKind
    name: str | None = None
    value: str | None = None  # raw value (inside the quotes when quoted)
    quoted: bool = False
    value_start: int = -1  # span of the raw value inside `text`
    value_end: int = -1

    def assignment(self, path: str) -> Assignment:
        assert self.name is not None and self.value is not None
        return Assignment(path=path, line=self.number, name=self.name, value=self.value)


def classify(text: bytes) -> tuple[LineKind, re.Match[bytes] | None, bool]:
    """Classify one line (no \\n) like config.parse: kind, the match, and whether the value was quoted."""
    if _BLANK.match(text):
        return "blank", None, False
    if _COMMENT.match(text):
        return "comment", None, False
    for quoted_re, word_re in _PATTERNS:
        m = quoted_re.match(text)
        quoted = m is not None
        if m is None and word_re is not None:
            m = word_re.match(text)
        if m is None:
            continue
        # The first pattern that matches decides: a bad tail makes the line malformed.
        if _VALID_TAIL.match(m.group("c")):
            return "assign", m, quoted
        return "malformed", None, False
    return "malformed", None, False


def parse(data: bytes) -> list[Line]:
    """Every physical line of `data` (the final unterminated line included), classified."""
    lines: list[Line] = []
    offset = 0
    number = 0
    n = len(data)
    while offset < n:
        number += 1
        nl = data.find(b"\n", offset)
        end = n if nl < 0 else nl
        text = data[offset:end]
        kind, m, quoted = classify(text)
        if m is not None:
            lines.append(
                Line(
                    number=number,
                    offset=offset,
                    text=text,
                    terminated=nl >= 0,
                    kind=kind,
                    name=_s(m.group("n")),
                    value=_s(m.group("v")),
                    quoted=quoted,
                    value_start=m.start("v"),
                    value_end=m.end("v"),
                )
            )
        else:
            lines.append(Line(number=number, offset=offset, text=text, terminated=nl >= 0, kind=kind))
        offset = end + 1
    return lines


def assignments(path: str, data: bytes) -> list[Assignment]:
    """The assignments the loader makes from `data`, in file order (comments and malformed lines skipped)."""
    return [ln.assignment(path) for ln in parse(data) if ln.kind == "assign"]


def malformed(data: bytes) -> list[int]:
    """Line numbers the loader would reject with "Malformed line"."""
    return [ln.number for ln in parse(data) if ln.kind == "malformed"]


def is_yes(assignment: Assignment | None) -> bool:
    """True when a `<module>_load` assignment makes the loader load the module."""
    return assignment is not None and assignment.value.lower() == "yes"


def _rank(path: str) -> tuple[int, str]:
    if path.endswith("/loader.conf.local") or path == "loader.conf.local":
        return (2, "")
    if "/loader.conf.d/" in path:
        return (1, path)
    if path.endswith("/loader.conf") or path == "loader.conf":
        return (0, "")
    return (1, "\uffff")  # unknown files: after loader.conf.d, before loader.conf.local, as given


def loader_order(files: Sequence[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """`files` in the order the loader reads them: loader.conf, loader.conf.d/*.conf (by name), .local.

    Works with `--root` prefixes (it looks at the path's tail); the sort is stable.
    """
    return sorted(files, key=lambda f: _rank(f[0]))


def all_assignments(files: Iterable[tuple[str, bytes]], name: str) -> list[Assignment]:
    """Every assignment of `name` in loader order."""
    out: list[Assignment] = []
    for path, data in loader_order(list(files)):
        out.extend(a for a in assignments(path, data) if a.name == name)
    return out


def effective(files: Iterable[tuple[str, bytes]], name: str) -> Assignment | None:
    """The assignment of `name` that wins (the last one in loader order), or None if none is made."""
    found = all_assignments(files, name)
    return found[-1] if found else None


def order_ambiguous(files: Iterable[tuple[str, bytes]], name: str) -> bool:
    """True if loaders before 14.1 (loader.conf.local read before loader.conf.d) would pick another value."""
    ordered = loader_order(list(files))
    old = [f for r in (0, 2, 1) for f in ordered if _rank(f[0])[0] == r]
    a, b = effective(ordered, name), _last(old, name)
    return is_yes(a) != is_yes(b)


def _last(ordered: list[tuple[str, bytes]], name: str) -> Assignment | None:
    found: list[Assignment] = []
    for path, data in ordered:
        found.extend(a for a in assignments(path, data) if a.name == name)
    return found[-1] if found else None


def files_from_evidence(evidence: Evidence, root: str = "") -> list[tuple[str, bytes]]:
    """The loader configuration files the probe read, in loader order (missing files are left out)."""
    root = root.rstrip("/")
    out: list[tuple[str, bytes]] = []
    conf = evidence.file(root + LOADER_CONF)
    if conf is not None:
        out.append((root + LOADER_CONF, conf))
    for path in evidence.files_under(root + LOADER_CONF_DIR):
        if path.endswith(".conf"):
            data = evidence.file(path)
            if data is not None:
                out.append((path, data))
    local = evidence.file(root + LOADER_CONF_LOCAL)
    if local is not None:
        out.append((root + LOADER_CONF_LOCAL, local))
    return out
