"""Moved to bsdcrypt.render.prometheus: re-exported here until every branch has merged the move."""

from bsdcrypt.render.prometheus import (
    BENCH_PREFIX,
    PREFIX,
    escape_help,
    escape_label_value,
    format_value,
    render,
    render_bench,
)

__all__ = ["BENCH_PREFIX", "PREFIX", "escape_help", "escape_label_value", "format_value", "render", "render_bench"]
