"""Untrusted host text made safe to print: the one sanitizer every text renderer uses.

Text from a host (a loader.conf comment, a host name, a hostname from a recording, a CPU brand string,
an SSH banner) is untrusted. Text renderers (table, CSV, Nagios, Prometheus labels, the enable plan
and diff, the fleet table, analyze, bench, error lines) show every character that str.isprintable()
rejects (controls such as ESC, CR, line feed inside a field, DEL, C1 controls, bidi overrides, lone
surrogates) as a visible escape (`\\x1b`, `\\u202e`), and cut what one field can print
(FIELD_LIMIT characters, a finding's message MESSAGE_LIMIT) with a marker saying how much was cut.
JSON and YAML are not passed through here: their own escaping keeps the exact value.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

FIELD_LIMIT = 256  # one host-supplied field: a host name is at most 255 bytes (MAXHOSTNAMELEN - 1)
MESSAGE_LIMIT = 1024  # a finding's message or an error line: our words around host text
LIST_LIMIT = 64  # rows one host can add to a text report (GELI providers, other drivers)
LINE_LIMIT = 1024  # one line of a block the host wrote (a loader.conf line in a diff)

T = TypeVar("T")


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def cut_marker(cut: int) -> str:
    """What stands in for the `cut` characters a limit left out (the HTML report uses the same rule)."""
    return f"…[{cut} more characters]"


def visible(text: str, limit: int | None = FIELD_LIMIT) -> str:
    """`text` with every non-printable character (but the plain space) shown as an escape, and at
    most `limit` characters of it kept (None: all), then cut_marker(how many were left out)."""
    if text.isprintable() and (limit is None or len(text) <= limit):
        return text
    out: list[str] = []
    shown = 0
    for i, ch in enumerate(text):
        piece = ch if ch.isprintable() else _escape(ch)
        if limit is not None and shown + len(piece) > limit:
            return "".join(out) + cut_marker(len(text) - i)
        out.append(piece)
        shown += len(piece)
    return "".join(out)


def visible_lines(text: str, limit: int | None = None) -> str:
    """A whole rendered block: each line through visible() (its line feeds kept, each line cut at
    `limit`); the safety net every text renderer applies to what it returns."""
    if text.isprintable():
        return text
    return "\n".join(visible(line, limit) for line in text.split("\n"))


def visible_status(status: T) -> T:
    """A copy of a Status (or any of its parts) for a text report: every string through visible(),
    finding messages and remedies to MESSAGE_LIMIT, lists of host rows to LIST_LIMIT."""
    result: T = _clean(status, FIELD_LIMIT)
    return result


def _clean(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return visible(value, limit)
    if isinstance(value, list):
        return [_clean(v, limit) for v in value[:LIST_LIMIT]]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            inner = MESSAGE_LIMIT if f.name in ("message", "remedy") else limit
            got = getattr(value, f.name)
            if f.name == "findings":  # all of them: the verdict is theirs (one per finding kind anyway)
                changes[f.name] = [_clean(x, inner) for x in got]
            else:
                changes[f.name] = _clean(got, inner)
        return dataclasses.replace(value, **changes)
    return value
