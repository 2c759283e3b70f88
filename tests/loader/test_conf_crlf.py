"""Issue 26: a CRLF loader.conf whose last line ends in a lone CR. The lua loader (stand/lua/config.lua,
`config.parse`) splits the text on LF only and prints every line it cannot parse as `Malformed line (N):
'LINE'`; an edit must never make that reading worse: every line the loader read before is read byte for
byte the same after, only the edited assignment changes and one valid line may be added."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.loader.conf import restore, set_yes
from bsdcrypt.parsers.loaderconf import parse

CONF = "/boot/loader.conf"


def loader_lines(data: bytes) -> list[bytes]:
    """The lines config.parse iterates over: text:gmatch("([^\\n]+)"), empty ones never seen."""
    return [ln for ln in data.split(b"\n") if ln]


def test_a_last_line_ending_in_a_lone_cr_gets_only_lf() -> None:
    data = b'zfs_load="YES"\r\njunk\r'
    (edit,) = set_yes([(CONF, data)])
    assert edit.after == b'zfs_load="YES"\r\njunk\r\naesni_load="YES" # bsdcrypt enable: added+lf\r\n'
    assert loader_lines(edit.after)[:2] == loader_lines(data)  # 'junk\r' is printed exactly as before
    (undo,) = restore([(CONF, edit.after)])
    assert undo.after == data


def test_an_older_added_eol_marker_is_still_undone() -> None:
    after = b'zfs_load="YES"\r\njunk\r\r\naesni_load="YES" # bsdcrypt enable: added+eol\r\n'
    (undo,) = restore([(CONF, after)])
    assert undo.after == b'zfs_load="YES"\r\njunk\r'


_pieces = st.sampled_from([
    b"\r\n", b"\n", b"\r", b"junk", b'aesni_load="NO"', b"aesni_load=NO", b'x="1"', b"# c", b" ", b"\t", b'"', b"=",
    b'zfs_load="YES"', b"aesni_load", b"#",
])


def _reading(data: bytes) -> list[tuple[str, str | None, str | None, bytes]]:
    """What config.parse makes of each line it sees: kind, name and value; a malformed line by its text
    without trailing white space (CR included: `%s`), which is what its message shows."""
    return [
        (ln.kind, ln.name, ln.value, ln.text.rstrip(b" \t\v\f\r") if ln.kind == "malformed" else b"")
        for ln in parse(data)
        if ln.kind != "blank" and ln.name != "aesni_load"
    ]


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(parts=st.lists(_pieces, max_size=14))
def test_an_edit_never_makes_the_loaders_reading_worse(parts: list[bytes]) -> None:
    data = b"".join(parts)
    try:
        edits = set_yes([(CONF, data)])
    except ValueError:  # EditError: refused, nothing written
        return
    if not edits:
        return
    (edit,) = edits
    # every line the loader read, other than aesni_load's, is read the same; no malformed line is added
    assert _reading(edit.after) == _reading(data)
    last = data.split(b"\n")[-1]
    if data.endswith(b"\r") and b"aesni_load" not in last:  # the lone CR case: that line is kept byte for byte
        assert last in edit.after.split(b"\n")
    (undo,) = restore([(CONF, edit.after)])
    assert undo.after == data
