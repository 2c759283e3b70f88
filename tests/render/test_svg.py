"""bsdcrypt.render.svg: bar geometry, escaping, whiskers, empty and zero data."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from bsdcrypt.render.svg import Bar, Group, Segment, hbar_chart

NS = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed XML, or this raises


def rects(root: ET.Element) -> list[ET.Element]:
    return list(root.iter(f"{NS}rect"))


def test_bars_are_proportional_to_their_values_and_the_longest_fills_the_span() -> None:
    svg = hbar_chart([Group("", [Bar("a", (Segment("ok", 10),)), Bar("b", (Segment("critical", 5),))])],
                     title="t", width=500, label_width=100, value_width=100)
    widths = [float(r.get("width") or 0) for r in rects(parse(svg))]
    assert widths == [300.0, 150.0]
    assert [r.get("class") for r in rects(parse(svg))] == ["c-ok", "c-critical"]


def test_stacked_segments_follow_each_other() -> None:
    svg = hbar_chart([Group("", [Bar("x", (Segment("ok", 1), Segment("warning", 3)))])],
                     title="t", width=500, label_width=100, value_width=0)
    a, b = rects(parse(svg))
    assert float(a.get("x") or 0) == 100.0 and float(a.get("width") or 0) == 100.0
    assert float(b.get("x") or 0) == 200.0 and float(b.get("width") or 0) == 300.0


def test_every_text_is_escaped_and_stays_well_formed() -> None:
    evil = "<script>alert('x')</script> & \"q\""
    svg = hbar_chart([Group(evil, [Bar(evil, (Segment("ok", 1, title=evil),), text=evil)])], title=evil)
    assert "<script>" not in svg
    root = parse(svg)
    texts = [t.text for t in root.iter() if t.text]
    assert evil in texts  # the full label in the tooltip, as text
    assert root.get("aria-label") == evil


def test_a_segment_key_cannot_inject_attributes() -> None:
    with pytest.raises(ValueError):
        hbar_chart([Group("", [Bar("a", (Segment('ok" onload="x', 1),))])], title="t")


def test_zero_and_empty_data_draw_no_bar_but_keep_the_row() -> None:
    svg = hbar_chart([Group("", [Bar("none", (Segment("ok", 0),))])], title="t")
    root = parse(svg)
    assert rects(root) == []
    assert any(t.text == "none" for t in root.iter(f"{NS}text"))
    assert rects(parse(hbar_chart([], title="empty"))) == []


def test_whisker_spans_min_to_max_and_scales_the_chart() -> None:
    svg = hbar_chart([Group("", [Bar("r", (Segment("accel", 80),), whisker=(60, 100))])],
                     title="t", width=400, label_width=100, value_width=100)
    root = parse(svg)
    (rect,) = rects(root)
    assert float(rect.get("width") or 0) == pytest.approx(160.0)  # 80 of a 100 scale over 200 px
    (path,) = root.iter(f"{NS}path")
    xs = [float(x) for x in re.findall(r"M([0-9.]+)", path.get("d") or "")]
    assert min(xs) == pytest.approx(220.0) and max(xs) == pytest.approx(300.0)


def test_long_labels_are_cut_but_kept_whole_in_the_tooltip() -> None:
    label = "FreeBSD 14.0-CURRENT on a very long product name indeed, far too long"
    root = parse(hbar_chart([Group("", [Bar(label, (Segment("ok", 1),))])], title="t", label_width=140))
    shown = [t.text or "" for t in root.iter(f"{NS}text")]
    assert any(s.endswith("…") and label.startswith(s[:-1]) for s in shown)
    assert any(label in (t.text or "") for t in root.iter(f"{NS}title"))
