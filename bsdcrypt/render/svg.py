"""Horizontal bar charts as inline SVG: one small, pure function, every text escaped.

A chart is a list of groups, each a heading and bars; a bar is one or more stacked segments and
may carry a whisker (the min..max of repeated runs). Colours come from CSS classes (`c-KEY`), so the
page's style sheet (light and dark) decides them and the SVG needs no style attribute, which keeps
a strict Content-Security-Policy (no 'unsafe-inline') working.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from markupsafe import Markup, escape

ROW = 22  # px per bar
BAR = 14  # bar thickness
HEADING = 20  # px for a group heading
_KEY = re.compile(r"[a-z0-9-]{1,40}")


@dataclass(frozen=True)
class Segment:
    key: str  # CSS class suffix: c-<key>; [a-z0-9-] only
    value: float
    title: str = ""  # tooltip (<title>); the bar's label and value if empty


@dataclass(frozen=True)
class Bar:
    label: str
    segments: tuple[Segment, ...]
    text: str | None = None  # shown right of the bar; the total (with the unit) if None
    whisker: tuple[float, float] | None = None  # min, max of the runs behind the bar

    @property
    def total(self) -> float:
        return sum(s.value for s in self.segments)


@dataclass(frozen=True)
class Group:
    heading: str
    bars: list[Bar] = field(default_factory=list)


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _fit(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def hbar_chart(
    groups: list[Group],
    *,
    title: str,
    unit: str = "",
    width: int = 560,
    label_width: int = 220,
    value_width: int = 110,
    scale_max: float | None = None,
) -> Markup:
    """The chart as an <svg> element (Markup: safe to insert into an autoescaped template).

    Bars are scaled to `scale_max` (default: the longest bar or whisker); zero or negative values
    draw no bar but keep their row and text. Labels longer than the label column are cut with an
    ellipsis; the whole label stays in the bar's tooltip.
    """
    for g in groups:
        for b in g.bars:
            for s in b.segments:
                if not _KEY.fullmatch(s.key):
                    raise ValueError(f"bad segment key {s.key!r}")
    top = scale_max
    if top is None:
        ends = [b.total for g in groups for b in g.bars] + [b.whisker[1] for g in groups for b in g.bars if b.whisker]
        top = max(ends, default=0.0)
    span = width - label_width - value_width
    chars = max(4, int(label_width / 7.2))  # ~7 px a character at the charts' 12 px
    out: list[str] = []
    y = 4
    for g in groups:
        if g.heading:
            out.append(f'<text class="gh" x="0" y="{y + 14}">{escape(_fit(g.heading, width // 7))}</text>')
            y += HEADING
        for b in g.bars:
            mid = y + ROW // 2
            unit_sp = f" {unit}" if unit else ""
            text = b.text if b.text is not None else f"{_num(b.total)}{unit_sp}"
            out.append(f'<g><title>{escape(b.label)}: {escape(text)}</title>')
            out.append(f'<text class="lb" x="{label_width - 8}" y="{mid + 4}">{escape(_fit(b.label, chars))}</text>')
            x = float(label_width)
            for s in b.segments:
                w = span * s.value / top if top > 0 and s.value > 0 else 0.0
                if w > 0:
                    tip = f"<title>{escape(s.title)}</title>" if s.title else ""
                    out.append(
                        f'<rect class="c-{s.key}" x="{x:.1f}" y="{mid - BAR // 2}" width="{max(w, 1.0):.1f}" '
                        f'height="{BAR}" rx="2">{tip}</rect>'
                    )
                    x += w
            if b.whisker and top > 0:
                lo, hi = (label_width + span * max(v, 0.0) / top for v in b.whisker)
                out.append(
                    f'<path class="wk" d="M{lo:.1f} {mid}H{hi:.1f}M{lo:.1f} {mid - 5}v10M{hi:.1f} {mid - 5}v10"/>'
                )
                x = max(x, hi)
            out.append(f'<text class="vl" x="{x + 6:.1f}" y="{mid + 4}">{escape(text)}</text></g>')
            y += ROW
    height = y + 4
    return Markup(
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>{''.join(out)}</svg>"
    )
