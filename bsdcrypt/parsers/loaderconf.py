"""loader.conf(5) lines classified exactly the way the FreeBSD lua loader reads them (pure, bytes in).

The model is `stand/lua/config.lua` (`config.parse`, `pattern_table`, `checkPattern`,
`isValidComment`), the default loader since FreeBSD 12.0:

* The text is split on ``\\n`` only (``text:gmatch("([^\\n]+)")``); a CR of a CRLF file stays in the
  line and counts as whitespace (``%s`` is C ``isspace``).
* A line that is only whitespace is ignored; a line whose first non-blank byte is ``#`` is a comment.
* Patterns are tried in order: comment, ``<module>_load|_name|_type|_flags|_before|_after|_error``,
  ``exec``, then any other ``name=value`` (an environment variable).  Each is tried first with a
  double-quoted value ``"(.*)"`` (greedy: up to the *last* ``"`` of the line) and only if that does not
  match with a bare word ``[-%w%d][-%w%d_.]*``.  Whatever follows the value must be blank or a ``#``
  comment, else the line is "Malformed" and the loader skips it (it keeps reading the next lines).

Everything works on bytes: CRLF, a missing final newline, tabs and non-UTF-8 bytes are kept as they
are.  Names and values are returned as ``str`` decoded with ``surrogateescape`` (`decode`).
How the loader orders the files and edits to them are in `bsdcrypt.loader.conf`; what each loader
generation reads in `bsdcrypt.loader.model`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bsdcrypt.facts import Assignment

LineKind = Literal["blank", "comment", "assign", "malformed"]

# C isspace() in the loader's libsa: space, \t, \n, \v, \f, \r.
_SP = rb"[ \t\n\v\f\r]*"
_QVAL = rb'"(?P<v>.*)"'  # QVALEXPR '"(.*)"' (greedy)
_WORD = rb"(?P<v>[-A-Za-z0-9][-A-Za-z0-9_.]*)"  # WORDEXPR "([-%w%d][-%w%d_.]*)"
_MODULE_SUFFIXES = ("load", "name", "type", "flags", "before", "after", "error")
_SPACES = b" \t\n\v\f\r"
_VALID_TAIL = re.compile(rb"\A[ \t\n\v\f\r]*(?:#.*)?\Z", re.S)  # isValidComment()


def _compile(name_re: bytes, value_re: bytes) -> re.Pattern[bytes]:
    return re.compile(rb"\A" + _SP + name_re + _SP + b"=" + _SP + value_re + _SP + rb"(?P<c>.*)\Z", re.S)


# config.lua's pattern_table, after the comment entry: for each module suffix (load, name, type...) a
# quoted and a word pattern on MODULEEXPR "[-%w_]+" + "_" + suffix, then exec (quoted), then any
# variable "[%w][-%w%d_.]*" (quoted, word). The first pattern that matches a line decides. They differ
# only in which names they take: a name is the token before "=", and a value is quoted or a word,
# never both, so "some pattern matches" is "the line matches the quoted or the word form and its name
# is one the table takes" (exec, a variable name, also passes the variable pattern). Two regexes
# instead of seventeen: compiling those was a tenth of `status`'s start-up.
_NAME = rb"(?P<n>[-A-Za-z0-9_.]+)"
_QUOTED = _compile(_NAME, _QVAL)
_WORDED = _compile(_NAME, _WORD)
_MODULE_NAME = re.compile(rb"[-A-Za-z0-9_]+_(?:" + b"|".join(s.encode() for s in _MODULE_SUFFIXES) + rb")")
_VARIABLE_NAME = re.compile(rb"[A-Za-z0-9][-A-Za-z0-9_.]*")


def _table_takes(name: bytes) -> bool:
    return _MODULE_NAME.fullmatch(name) is not None or _VARIABLE_NAME.fullmatch(name) is not None


def decode(raw: bytes) -> str:
    """Host bytes as str, undecodable bytes kept (surrogateescape)."""
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
    rest = text.lstrip(_SPACES)  # _BLANK and _COMMENT without a regex call (most lines of most files)
    if not rest:
        return "blank", None, False
    if rest[:1] == b"#":
        return "comment", None, False
    m = _QUOTED.match(text)
    quoted = m is not None
    if m is None:
        m = _WORDED.match(text)
    if m is None or not _table_takes(m.group("n")):
        return "malformed", None, False
    # The first pattern that matches decides: a bad tail makes the line malformed.
    if _VALID_TAIL.match(m.group("c")):
        return "assign", m, quoted
    return "malformed", None, False


_KINDS: frozenset[LineKind] = frozenset({"blank", "comment", "malformed"})  # and "assign", always kept


def parse(data: bytes) -> list[Line]:
    """Every physical line of `data` (the final unterminated line included), classified."""
    return _lines(data, _KINDS)


def meaningful(data: bytes) -> list[Line]:
    """The lines of `data` the loader acts on: assignments, malformed lines and any line holding a CR
    (the Forth loader stops there). Blank and comment lines are left out: no Line for each of the
    million newlines a hostile file may hold."""
    return _lines(data, frozenset({"malformed"}), with_cr=True)


def _lines(data: bytes, keep: frozenset[LineKind], with_cr: bool = False) -> list[Line]:
    """The assignments of `data`, and its lines of a kind in `keep` (`with_cr`: and any holding a CR)."""
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
                    name=decode(m.group("n")),
                    value=decode(m.group("v")),
                    quoted=quoted,
                    value_start=m.start("v"),
                    value_end=m.end("v"),
                )
            )
        elif kind in keep or with_cr and b"\r" in text:
            lines.append(Line(number=number, offset=offset, text=text, terminated=nl >= 0, kind=kind))
        offset = end + 1
    return lines


def assignments(path: str, data: bytes) -> list[Assignment]:
    """The assignments the loader makes from `data`, in file order (comments and malformed lines skipped)."""
    return [ln.assignment(path) for ln in _lines(data, frozenset())]


def malformed(data: bytes) -> list[int]:
    """Line numbers the loader would reject with "Malformed line"."""
    return [ln.number for ln in meaningful(data) if ln.kind == "malformed"]
