"""The one terminal bar renderer (render/bars.py), as bench's tables use it (issue 29: one bar renderer)."""

from __future__ import annotations

from bsdcrypt.render.bars import bar
from bsdcrypt.render.bench import BAR_WIDTH, bar_chart


def test_fill_pads_to_the_width() -> None:
    assert bar(1, 2, 4, "·") == "██··"
    assert bar(0, 2, 3, "·") == "···"
    assert bar(1, 3, 4, "·") == "█▍··"  # a third of 4 cells: one cell and 3/8, exact to an eighth


def test_bench_chart_uses_it() -> None:
    lines = bar_chart([("write GELI", 2825.0), ("write before", 530.0)]).splitlines()
    assert lines[0] == f"  write GELI    {'█' * BAR_WIDTH}      2825 MiB/s"
    assert lines[1].startswith("  write before  " + bar(530.0, 2825.0, BAR_WIDTH, "·"))
    assert len({len(line) for line in lines}) == 1
