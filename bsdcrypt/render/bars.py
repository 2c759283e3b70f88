"""Compact Unicode bar charts for the terminal (eighth blocks: a bar is exact to 1/8 of a cell)."""

from __future__ import annotations

EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(value: float, top: float, width: int, fill: str = " ") -> str:
    """A bar of `width` cells at most for value/top, exact to an eighth of a cell, padded with `fill`
    to `width` (bench's tables pad with `·`, so the scale shows)."""
    if top <= 0 or value <= 0:
        return fill * width
    eighths = round(8 * width * min(value, top) / top)
    full, part = divmod(eighths, 8)
    out = "█" * full + (EIGHTHS[part] if part else "")
    return out + fill * (width - len(out))


def chart(groups: list[tuple[str, list[tuple[str, float, str]]]], width: int = 32) -> str:
    """Groups of (label, value, text) rows: one line per row, bars on one scale across all groups."""
    rows = [r for _, rs in groups for r in rs]
    if not rows:
        return ""
    top = max(v for _, v, _ in rows)
    lw = max(len(label) for label, _, _ in rows)
    out = []
    for heading, rs in groups:
        if heading:
            out.append(heading)
        for label, value, text in rs:
            out.append(f"  {label:<{lw}}  {bar(value, top, width)}  {text}".rstrip())
    return "\n".join(out) + "\n"
