"""bsdcrypt.render.fit: prose, parts and tables fitted to a width (issue 28: an 80-column console)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.render.fit import MIN_WIDTH, Column, fit_block, fit_columns, usable, wrap, wrap_parts


def test_usable_width() -> None:
    assert usable(None) is None
    assert usable(132) == 132
    assert usable(12) == MIN_WIDTH


def test_wrap_keeps_options_and_assignments_whole() -> None:
    text = 'kldload aesni now; to keep it: bsdcrypt enable --persist (changes aesni_load="NO" to "YES")'
    lines = wrap(text, 30, "-> ", "   ")
    assert lines[0].startswith("-> ") and all(line.startswith("   ") for line in lines[1:])
    assert all(len(line) <= 30 for line in lines)
    assert any("--persist" in line for line in lines) and any('aesni_load="NO"' in line for line in lines)
    assert " ".join(line.strip() for line in lines).removeprefix("-> ") == text


def test_wrap_cuts_a_word_longer_than_a_line() -> None:
    assert wrap("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    assert wrap("", 10, "-> ") == ["->"]


def test_wrap_parts_breaks_between_parts() -> None:
    line = "Intel(R) Xeon(R) CPU E3-1225 v5 @ 3.30GHz  AES: yes  SHA: no  VM: bhyve"
    assert wrap_parts(line, 80) == [line]
    assert wrap_parts(line, 60) == ["Intel(R) Xeon(R) CPU E3-1225 v5 @ 3.30GHz  AES: yes  SHA: no", "VM: bhyve"]
    assert wrap_parts(line, 30, "  ") == [
        "Intel(R) Xeon(R) CPU E3-1225", "  v5 @ 3.30GHz  AES: yes", "  SHA: no  VM: bhyve"
    ]


def test_fit_block_keeps_its_lines() -> None:
    assert fit_block("aesni: loaded\nossl: not-loaded", 40) == "aesni: loaded\nossl: not-loaded"


COLUMNS = [
    Column("host", "host", 8),
    Column("os", "OS / release", 8),
    Column("state", "state"),
    Column("finding", "top finding", 10),
]
ROWS = [
    {"host": "fw1.example.org", "os": "FreeBSD 12.2-RELEASE", "state": "not-loaded",
     "finding": "driver-not-loaded: aesni.ko is on disk but not loaded"},
    {"host": "nas", "os": "FreeBSD 13.1-RELEASE (TrueNAS 13.0)", "state": "builtin", "finding": ""},
]


def _width(columns: list[Column], cells: list[list[str]]) -> int:
    widths = [max([len(c.header), *(len(line) for row in cells for line in row[i].split("\n"))])
              for i, c in enumerate(columns)]
    return sum(widths) + 2 * (len(widths) - 1)


def test_a_table_that_fits_is_left_alone() -> None:
    shown, cells, dropped = fit_columns(COLUMNS, ROWS, 200)
    assert shown == COLUMNS and not dropped
    assert cells[0] == [ROWS[0][k] for k in ("host", "os", "state", "finding")]


def test_flexible_columns_narrow_first_then_columns_are_dropped() -> None:
    shown, cells, dropped = fit_columns(COLUMNS, ROWS, 70, drop=["os"])
    assert shown == COLUMNS and not dropped  # wrapping was enough
    assert _width(shown, cells) <= 70
    shown, cells, dropped = fit_columns(COLUMNS, ROWS, 40, drop=["os"])
    assert [c.key for c in dropped] == ["os"] and "os" not in [c.key for c in shown]
    assert _width(shown, cells) <= 40
    # every character of a wrapped cell is there, in order (a word longer than the column is cut)
    assert "".join(cells[0][-1].split()) == "".join(ROWS[0]["finding"].split())
    assert cells[0][1] == "not-loaded"  # a fixed column is never narrowed


def test_a_clipped_column_stays_one_line() -> None:
    cols = [Column("host", "host"), Column("finding", "top finding", 10, clip=True)]
    shown, cells, _ = fit_columns(cols, ROWS, 30)
    assert "\n" not in cells[0][1] and cells[0][1].endswith("…") and _width(shown, cells) <= 30


def test_host_names_break_at_dots_and_hyphens() -> None:
    cols = [Column("host", "host", 10), Column("v", "verdict")]
    rows = [{"host": "replay:freebsd-12.2-bhyve-not-loaded-overridden", "v": "WARNING"}]
    _, cells, _ = fit_columns(cols, rows, 30)
    lines = cells[0][0].split("\n")
    assert "".join(lines) == rows[0]["host"] and all(len(line) <= 21 for line in lines)
    assert lines[0].endswith(("-", ".", ":"))


@given(st.lists(st.text(alphabet="ab -./", min_size=0, max_size=60), min_size=1, max_size=5),
       st.integers(min_value=40, max_value=120))
def test_any_table_fits_once_its_flexible_columns_can(texts: list[str], width: int) -> None:
    cols = [Column("a", "a", 5), Column("b", "b", 5)]
    rows = [{"a": t, "b": t[::-1]} for t in texts]
    shown, cells, _ = fit_columns(cols, rows, width)
    assert _width(shown, cells) <= width
