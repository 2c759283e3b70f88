"""Issue 28's smaller items: an absolute host name, help paragraphs that wrap at the terminal's width."""

from __future__ import annotations

import pytest

from bsdcrypt.cli.app import reflow
from bsdcrypt.hostspec import SpecError, split_spec


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("localhost.", (None, "localhost.", None)),
        ("root@localhost.", ("root", "localhost.", None)),
        ("admin@fw1.example.org.:2222", ("admin", "fw1.example.org.", 2222)),
    ],
)
def test_an_absolute_dns_name_is_a_host(spec: str, expected: tuple[str | None, str, int | None]) -> None:
    assert split_spec(spec) == expected


@pytest.mark.parametrize("spec", [".", "..", "localhost..", "fw1..example.org", ".localhost", "-x."])
def test_dots_that_make_no_name_stay_refused(spec: str) -> None:
    with pytest.raises(SpecError):
        split_spec(spec)


def test_help_paragraphs_are_one_line_each() -> None:
    doc = """Load the driver now.

    Explains every no-op (compiled in,
    no AES-NI). Exit status: 0 done or
        nothing to do.
    """
    assert reflow(doc) == "Load the driver now.\n\nExplains every no-op (compiled in, no AES-NI). Exit status: 0 done or nothing to do."
