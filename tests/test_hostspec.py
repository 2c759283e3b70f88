"""The grammar of a host (bsdcrypt.hostspec): an absolute DNS name (one trailing dot) is a host name."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize(("spec", "error"), [
    ("fw:²", "bad port '²'"), ("fw:١٢", "bad port '١٢'"),  # str.isdigit() says yes to both; int('²') raises
    ("fw:" + "9" * 5000, "out of range 1-65535"), ("fw:99999", "port 99999 is out of range 1-65535"),
])
def test_a_port_int_refuses_is_a_spec_error_not_a_traceback(spec: str, error: str) -> None:
    with pytest.raises(SpecError, match=error):
        split_spec(spec)
