"""`bsdcrypt recordings`: one line per shipped recording, NAME, what it is made of, what it shows."""

from __future__ import annotations

from bsdcrypt.render.fit import usable, wrap
from bsdcrypt.text import visible


def listing(rows: list[tuple[str, str, str]], width: int | None = None) -> str:
    """(name, made_of, description) rows as `NAME  MARK  description` lines, the names and marks in
    columns. With a width, a row that does not fit puts `[MARK] description` under its name, wrapped
    and indented by four spaces."""
    width = usable(width)
    rows = [(visible(n), visible(m), visible(d)) for n, m, d in rows]
    nw = max((len(n) for n, _, _ in rows), default=0)
    mw = max((len(m) for _, m, _ in rows), default=0)
    out = []
    for name, made, text in rows:
        line = f"{name:<{nw}}  {made:<{mw}}  {text}".rstrip()
        if width is None or len(line) <= width:
            out.append(line)
            continue
        out.append(name)
        out += wrap(f"[{made}] {text}" if made else text, width, "    ", "    ")
    return "".join(f"{line}\n" for line in out)
