"""Text reports fitted to a terminal's width.

A width of None means whole lines, exactly as the report has always been written (a pipe, a file,
`-o FILE`). Given a width, every line fits it: prose wraps under its own column, a line of parts set
apart by two spaces (`aesni: loaded  <AES-CBC,...>  (/boot/kernel/aesni.ko)`) breaks between parts,
and a table narrows its flexible columns (wrapping or clipping their cells) and, when that is not
enough, leaves out its least needed columns, which the caller names under the table. Widths count
characters: the text reaching here went through bsdcrypt.text (no control characters).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

MIN_WIDTH = 40  # narrower terminals get the 40-column layout (the tables cannot shrink further)
GAP = 2  # spaces between two table columns (tabulate's "simple" and "plain" formats)


def usable(width: int | None) -> int | None:
    """A requested width as the renderers use it: None stays None; anything narrower than MIN_WIDTH is MIN_WIDTH."""
    return None if width is None else max(width, MIN_WIDTH)


def wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """Prose in lines of at most `width` characters, the first line led by `first`, the others by
    `rest`. Lines break at spaces, never at hyphens (`--persist`, `aesni_load="YES"` stay whole); a
    word longer than a line is cut."""
    width = max(width, len(first) + 1, len(rest) + 1)
    lines = textwrap.wrap(
        text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False, break_long_words=True
    )
    return lines or [first.rstrip()]


_PARTS = re.compile(r" {2,}")


def wrap_parts(text: str, width: int, rest: str = "") -> list[str]:
    """One line of parts set apart by two or more spaces: as many whole parts on a line as fit, the
    lines after the first led by `rest`; a part wider than a line wraps as prose."""
    if len(text) <= width:
        return [text]
    lines: list[str] = []
    current = ""
    for part in _PARTS.split(text):
        lead = "" if not lines and not current else rest
        if current and len(current) + 2 + len(part) <= width:
            current += "  " + part
            continue
        if current:
            lines.append(current)
            current = ""
            lead = rest
        if len(lead) + len(part) <= width:
            current = lead + part
        else:
            pieces = wrap(part, width, lead, rest)
            lines += pieces[:-1]
            current = pieces[-1]
    if current:
        lines.append(current)
    return lines


def fit_block(text: str, width: int, rest: str = "") -> str:
    """Every line of a multi-line cell through wrap_parts (its own line feeds kept)."""
    return "\n".join(line for source in text.split("\n") for line in wrap_parts(source, width, rest))


@dataclass(frozen=True)
class Column:
    """A table column: `key` into each row, its header, and how it narrows. `least` is the fewest
    characters it may be narrowed to (0: never narrowed); `clip` cuts a cell to one line with `…`
    instead of wrapping it."""

    key: str
    header: str
    least: int = 0
    clip: bool = False


def _natural(col: Column, rows: Sequence[dict[str, str]]) -> int:
    cells = [line for row in rows for line in row[col.key].split("\n")]
    return max([len(col.header), *(len(c) for c in cells)])


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def fit_columns(
    columns: Sequence[Column], rows: Sequence[dict[str, str]], width: int, drop: Sequence[str] = ()
) -> tuple[list[Column], list[list[str]], list[Column]]:
    """The columns to show, the rows' cells fitted to them, and the columns left out.

    Every column starts at its natural width (its widest cell or header). While the table is wider
    than `width`, the widest flexible column (least > 0) loses a character, down to its `least`;
    if that is not enough, the columns named in `drop` are left out, in that order, and the widths
    are worked out again. Cells of a narrowed column wrap (or, with `clip`, are cut to one line)."""
    shown = list(columns)
    dropped: list[Column] = []
    queue = [c for key in drop for c in columns if c.key == key]
    while True:
        widths = {c.key: _natural(c, rows) for c in shown}
        excess = sum(widths.values()) + GAP * (len(shown) - 1) - width
        flexible = [c for c in shown if c.least]
        while excess > 0:  # one character at a time off the widest flexible column
            room = [c for c in flexible if widths[c.key] > max(c.least, len(c.header))]
            if not room:
                break
            widest = max(room, key=lambda c: widths[c.key])
            widths[widest.key] -= 1
            excess -= 1
        if excess <= 0 or not queue:
            break
        gone = queue.pop(0)
        if gone in shown:
            shown.remove(gone)
            dropped.append(gone)
    fitted = []
    for row in rows:
        cells = []
        for c in shown:
            w, cell = widths[c.key], row[c.key]
            if max(len(line) for line in cell.split("\n")) > w:
                cell = _clip(cell, w) if c.clip else "\n".join(
                    line for part in cell.split("\n") for line in _wrap_cell(part, w)
                )
            cells.append(cell)
        fitted.append(cells)
    return shown, fitted, dropped


def _wrap_cell(text: str, width: int) -> list[str]:
    """A table cell's line in `width` columns: at spaces where it has some, else at hyphens, dots and
    slashes (host names, paths), else cut."""
    if len(text) <= width:
        return [text]
    if " " in text.strip():
        return wrap(text, width)
    lines: list[str] = []
    rest = text
    while len(rest) > width:
        cut = max(rest.rfind(ch, 0, width) for ch in "-./:_@")
        cut = cut + 1 if cut > 0 else width
        lines.append(rest[:cut])
        rest = rest[cut:]
    return [*lines, rest] if rest else lines


def simple_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table as tabulate's "simple" format lays it out (header, dashes, left-aligned cells two spaces
    apart, a cell's lines under each other), but exactly as wide as its widest cells: tabulate pads a
    header two characters wider, which a fitted table cannot spare. No trailing spaces."""
    widths = [
        max([len(h), *(len(line) for row in rows for line in row[i].split("\n"))]) for i, h in enumerate(headers)
    ]
    pad = " " * GAP

    def lines(cells: Sequence[str]) -> list[str]:
        split = [c.split("\n") for c in cells]
        height = max(len(s) for s in split)
        return [
            pad.join(f"{(s[n] if n < len(s) else ''):<{w}}" for s, w in zip(split, widths, strict=True)).rstrip()
            for n in range(height)
        ]

    out = [*lines(headers), pad.join("-" * w for w in widths)]
    for row in rows:
        out += lines(row)
    return "\n".join(out)
