"""The loader.conf editor: smallest change to YES, exact undo, properties over generated configs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.enable.plan import plan_disable
from bsdcrypt.loader.conf import (
    EditError,
    FileEdit,
    apply,
    damaged_markers,
    effective,
    is_yes,
    line_ending,
    loader_order,
    order_ambiguous,
    restore,
    set_yes,
    verify_no_new_malformed,
)
from bsdcrypt.parsers.loaderconf import assignments, parse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "loaderconf"
CONF = "/boot/loader.conf"
LOCAL = "/boot/loader.conf.local"


def only(edits: list[FileEdit]) -> FileEdit:
    assert len(edits) == 1
    return edits[0]


# (files, path of the single edited file, its expected new content)
CASES: list[tuple[list[tuple[str, bytes]], str, bytes]] = [
    ([(CONF, b'zfs_load="YES"\n')], CONF, b'zfs_load="YES"\naesni_load="YES" # bsdcrypt enable: added\n'),
    ([(CONF, b'zfs_load="YES"')], CONF, b'zfs_load="YES"\naesni_load="YES" # bsdcrypt enable: added+eol\n'),
    (
        [(CONF, b"a=1\r\nb=2\r\n")],
        CONF,
        b'a=1\r\nb=2\r\naesni_load="YES" # bsdcrypt enable: added\r\n',
    ),
    (
        [(CONF, b"a=1\r\nb=2")],
        CONF,
        b'a=1\r\nb=2\r\naesni_load="YES" # bsdcrypt enable: added+eol\r\n',
    ),
    ([(CONF, b"")], CONF, b'aesni_load="YES" # bsdcrypt enable: added\n'),
    ([(CONF, b'aesni_load="NO"\n')], CONF, b'aesni_load="YES" # bsdcrypt enable: was=NO\n'),
    ([(CONF, b"aesni_load=NO\n")], CONF, b"aesni_load=YES # bsdcrypt enable: was=NO\n"),
    ([(CONF, b"aesni_load = no\t# off\r\n")], CONF, b"aesni_load = YES\t# off # bsdcrypt enable: was=no\r\n"),
    # duplicates: only the winner changes
    (
        [(CONF, b'aesni_load="YES"\nx=1\naesni_load="NO"\n')],
        CONF,
        b'aesni_load="YES"\nx=1\naesni_load="YES" # bsdcrypt enable: was=NO\n',
    ),
    # a commented line does not count and is left alone
    (
        [(CONF, b'#aesni_load="YES"\n')],
        CONF,
        b'#aesni_load="YES"\naesni_load="YES" # bsdcrypt enable: added\n',
    ),
    # the override in loader.conf.local is changed there, not shadowed
    (
        [(CONF, b'aesni_load="YES"\n'), (LOCAL, b'aesni_load="NO"\n')],
        LOCAL,
        b'aesni_load="YES" # bsdcrypt enable: was=NO\n',
    ),
    # a malformed aesni line is skipped by the loader: append a good one, leave the bad one
    (
        [(CONF, b'aesni_load="YES" junk\n')],
        CONF,
        b'aesni_load="YES" junk\naesni_load="YES" # bsdcrypt enable: added\n',
    ),
    # greedy quote: the recorded value has no quote, so the new line parses as YES
    (
        [(CONF, b'aesni_load="NO" # "x"\n')],
        CONF,
        b'aesni_load="YES" # bsdcrypt enable: was=NO%22%20%23%20%22x\n',
    ),
    # non-UTF-8 bytes elsewhere are untouched
    ([(CONF, b"x=\xe9\xff\n")], CONF, b'x=\xe9\xff\naesni_load="YES" # bsdcrypt enable: added\n'),
]


@pytest.mark.parametrize(("files", "path", "after"), CASES)
def test_set_yes_cases(files: list[tuple[str, bytes]], path: str, after: bytes) -> None:
    edit = only(set_yes(files))
    assert edit.path == path and edit.after == after
    new = apply(files, [edit])
    assert is_yes(effective(new, "aesni_load"))
    assert set_yes(new) == []  # idempotent
    assert apply(new, restore(new)) == loader_order(files)  # exact undo


def test_already_yes_is_a_noop() -> None:
    assert set_yes([(CONF, b'aesni_load="YES"\n')]) == []
    assert set_yes([(CONF, b"aesni_load=yes\n")]) == []


def test_missing_loader_conf_is_created() -> None:
    edit = only(set_yes([], root="/mnt/img/"))
    assert edit.path == "/mnt/img/boot/loader.conf" and not edit.existed and edit.before == b""
    assert edit.diff().startswith("--- /dev/null\n+++ /mnt/img/boot/loader.conf\n")


def test_root_prefixed_loader_conf_is_found() -> None:
    edit = only(set_yes([("/j/boot/loader.conf", b"")], root="/j"))
    assert edit.path == "/j/boot/loader.conf" and edit.existed


def test_pre_14_1_order_is_also_satisfied() -> None:
    files = [("/boot/loader.conf.d/a.conf", b'aesni_load="NO"\n'), (LOCAL, b'aesni_load="YES"\n')]
    assert order_ambiguous(files, "aesni_load")
    edit = only(set_yes(files))
    assert edit.path == "/boot/loader.conf.d/a.conf"
    assert not order_ambiguous(apply(files, [edit]), "aesni_load")


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir()))
def test_real_files_roundtrip(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    files = [(CONF, data)]
    edits = set_yes(files)
    if is_yes(effective(files, "aesni_load")):
        assert edits == []
        return
    edit = only(edits)
    assert edit.after.startswith(data) and edit.after.count(b"\n") == data.count(b"\n") + 1
    new = apply(files, edits)
    assert apply(new, restore(new)) == files


def test_real_local_override_fixture() -> None:
    # The BSDRP sample as loader.conf.local with aesni set to NO there, YES in loader.conf.
    local = (FIXTURES / "bsdrp-netbenches-apu2-ipsec-loader-conf-local-aesni.txt").read_bytes()
    head, _, tail = local.rpartition(b'aesni_load="YES"')  # the header comment mentions it too
    local = head + b'aesni_load="NO"' + tail
    files = [(CONF, b'aesni_load="YES"\n'), (LOCAL, local)]
    edit = only(set_yes(files))
    assert edit.path == LOCAL
    assert edit.after == head + b'aesni_load="YES" # bsdcrypt enable: was=NO' + tail


def test_restore_without_markers_changes_nothing() -> None:
    assert restore([(CONF, b'aesni_load="YES"\n')]) == []


def test_restore_after_user_edit_keeps_their_other_changes() -> None:
    files = [(CONF, b'a=1\naesni_load="NO"\n')]
    new = apply(files, set_yes(files))
    ((_, data),) = new
    data = b"z=9\n" + data + b"w=8\n"
    back = apply([(CONF, data)], restore([(CONF, data)]))
    assert back == [(CONF, b'z=9\na=1\naesni_load="NO"\nw=8\n')]


def test_line_ending() -> None:
    assert line_ending(b"a\r\nb\r\n") == b"\r\n"
    assert line_ending(b"a\nb\r\n") == b"\n"
    assert line_ending(b"") == b"\n"


def test_never_writes_a_malformed_line() -> None:
    with pytest.raises(EditError):
        verify_no_new_malformed(FileEdit(CONF, b"", b'aesni_load="YES" junk\n'))


def test_diff_shows_missing_newline_and_crlf() -> None:
    d = FileEdit(CONF, b"a=1", b"a=1\nb=2\n").diff()
    assert "\\ No newline at end of file" in d and "+b=2" in d
    assert "\u240d" in FileEdit(CONF, b"a=1\r\n", b"a=2\r\n").diff()


# ---- properties over generated configurations -------------------------------------------------

AESNI_LINES = [
    b'aesni_load="YES"',
    b'aesni_load="NO"',
    b"aesni_load=YES",
    b"aesni_load=no",
    b'aesni_load = "yes"',
    b'\taesni_load\t=\t"NO"\t# tab',
    b'#aesni_load="YES"',
    b'aesni_load="YES" junk',
    b'aesni_load=""',
    b'aesni_load="NO" # "quoted comment"',
]
OTHER_LINES = [
    b"",
    b"   ",
    b"# comment",
    b'zfs_load="YES"',
    b"kern.vty=vt",
    b"vfs.zfs.arc_max = 128M",
    b'hw.usb.no_pf="1"\t# Disable USB packet filtering',
    b"\xe9t\xe9=\xff",
    b"garbage line ;",
    b'cryptodev_load="YES"',
]

line_st = st.one_of(st.sampled_from(AESNI_LINES), st.sampled_from(OTHER_LINES))


@st.composite
def file_st(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(line_st, max_size=8))
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    if draw(st.integers(0, 3)) == 0:  # sometimes a file that mixes CRLF and LF lines
        ends = [draw(st.sampled_from([b"\n", b"\r\n"])) for _ in lines]
        data = b"".join(line + end for line, end in zip(lines, ends, strict=True))
        if lines and draw(st.booleans()):
            data = data[: -len(ends[-1])]
        return data
    data = eol.join(lines)
    if lines and draw(st.booleans()):
        data += eol
    return data


@st.composite
def files_st(draw: st.DrawFn) -> list[tuple[str, bytes]]:
    files: list[tuple[str, bytes]] = []
    if draw(st.integers(0, 9)):  # sometimes no loader.conf at all
        files.append((CONF, draw(file_st())))
    for name in draw(st.lists(st.sampled_from(["a.conf", "b.conf", "z.conf"]), unique=True, max_size=2)):
        files.append((f"/boot/loader.conf.d/{name}", draw(file_st())))
    if draw(st.booleans()):
        files.append((LOCAL, draw(file_st())))
    return files


def other_lines(data: bytes) -> list[bytes]:
    """The raw physical lines that are not aesni_load assignments, with their terminators: the bytes
    of the file, a CR of CRLF included."""
    return [
        data[ln.offset : ln.offset + len(ln.text) + (1 if ln.terminated else 0)]
        for ln in parse(data)
        if not (ln.kind == "assign" and ln.name == "aesni_load")
    ]


def assert_other_lines_kept(before: bytes, after: bytes) -> None:
    """Every line but the aesni_load ones byte-identical, line endings included; the one exception:
    when enable appends after an unterminated last line, that line gains the file's own line ending."""
    b, a = other_lines(before), other_lines(after)
    if b and not b[-1].endswith(b"\n") and len(a) == len(b) and a[-1] != b[-1]:
        assert a[-1] == b[-1] + line_ending(before)
        a, b = a[:-1], b[:-1]
    assert a == b


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (b"a=1\r\nb=2\r\n", b"a=1\nb=2\r\n"),  # CRLF -> LF
        (b"a=1\nb=2\n", b"a=1\r\nb=2\n"),  # LF -> CRLF
        (b"a=1\r\nb=2", b"a=1\r\nb=2\n"),  # the wrong line ending added to an unterminated CRLF line
        (b"a=1\n", b"a=1 \n"),
        (b"a=1\n# x\n", b"a=1\n"),
    ],
)
def test_the_byte_identity_check_catches_line_ending_changes(before: bytes, after: bytes) -> None:
    with pytest.raises(AssertionError):
        assert_other_lines_kept(before, after)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(files_st())
def test_property_enable(files: list[tuple[str, bytes]]) -> None:
    edits = set_yes(files)
    new = apply(files, edits)
    # exactly one effective assignment, and it is YES (under the old and the new file order)
    assert is_yes(effective(new, "aesni_load"))
    assert not order_ambiguous(new, "aesni_load")
    before = dict(files)
    for e in edits:
        assert e.before == before.get(e.path, b"")
        # every other line byte-identical, CR included (an appended line may follow; the last line may
        # gain the file's line ending)
        assert_other_lines_kept(e.before, e.after)
        # nothing the loader could fail to parse was added
        bad_before = {ln.text.rstrip(b"\r") for ln in parse(e.before) if ln.kind == "malformed"}
        assert all(ln.text.rstrip(b"\r") in bad_before for ln in parse(e.after) if ln.kind == "malformed")
    # enable twice = enable once
    assert set_yes(new) == []


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(files_st())
def test_property_disable_restores(files: list[tuple[str, bytes]]) -> None:
    edits = set_yes(files)
    new = apply(files, edits)
    back = apply(new, restore(new))
    expected = loader_order(files)
    if any(not e.existed for e in edits):  # enable created loader.conf; disable leaves it empty
        expected = loader_order([*files, (CONF, b"")])
    assert back == expected
    old = effective(files, "aesni_load")
    assert effective(back, "aesni_load") == old


# ---- damaged markers: never a traceback, never a guessed value ---------------------------------

# (the line as found, damaged?, what disable restores when it is not damaged)
MARKERS: list[tuple[bytes, bool, bytes | None]] = [
    (b'aesni_load="YES" # bsdcrypt enable: was=%ZZ', True, None),
    (b'aesni_load="YES" # bsdcrypt enable: was=%', True, None),
    (b'aesni_load="YES" # bsdcrypt enable: was=NO%4', True, None),
    (b'aesni_load="YES" # bsdcrypt enable: was=%%41', True, None),
    (b'aesni_load="YES" # bsdcrypt enable: was=%g0', True, None),
    (b'aesni_load="YES" # bsdcrypt enable: was=NO%0Aevil_load%3D%22YES%22', True, None),  # would add a line
    (b"aesni_load=YES # bsdcrypt enable: was=N%20O", True, None),  # a bare word cannot hold a space
    (b"aesni_load=YES # bsdcrypt enable: was=%22", True, None),  # nor a quote
    (b'aesni_load="YES" # bsdcrypt enable: was=%4e%4f', False, b'aesni_load="NO"'),  # lower-case hex is fine
    (b'aesni_load="YES" # bsdcrypt enable: was=', False, b'aesni_load=""'),
    (b'aesni_load="YES" # bsdcrypt enable: was=N%20O', False, b'aesni_load="N O"'),
    # not enable's marker at all (does not match its grammar): an ordinary comment, left alone
    (b'aesni_load="YES" # bsdcrypt enable: was=a"b', False, None),
    (b'aesni_load="YES" # bsdcrypt enable: wat', False, None),
    (b'aesni_load="YES" # bsdcrypt enable: was=NO trailing', False, None),
]


@pytest.mark.parametrize(("line", "damaged", "restored"), MARKERS)
@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b""])
def test_garbage_markers(line: bytes, damaged: bool, restored: bytes | None, eol: bytes) -> None:
    data = b"a=1" + (eol or b"\n") + line + eol
    files = [(CONF, data)]
    assert [m[:2] for m in damaged_markers(files)] == ([(CONF, 2)] if damaged else [])
    edits = restore(files)
    plan = plan_disable(files)
    if damaged:
        assert edits == []  # the line is left alone
        assert plan.refusal is not None and "damaged" in plan.refusal.reason and not plan.writes
        assert "\n" not in plan.refusal.reason + plan.refusal.advice
    elif restored is None:
        assert edits == [] and plan.refusal is None and not plan.writes
    else:
        assert [e.after for e in edits] == [b"a=1" + (eol or b"\n") + restored + eol]
        assert plan.refusal is None and len(plan.writes) == 1


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    value=st.sampled_from([b'"YES"', b"YES", b'"yes"']),
    tag=st.binary(max_size=12).map(lambda b: b"was=" + b.replace(b"\n", b"")) | st.text("%0123456789ABCDEFZz._-", max_size=10).map(
        lambda t: b"was=" + t.encode()
    ),
    eol=st.sampled_from([b"\n", b"\r\n", b""]),
)
def test_property_any_marker_is_undone_exactly_or_left_alone(value: bytes, tag: bytes, eol: bytes) -> None:
    """Whatever follows `was=`, disable never raises, never writes a malformed line, and either
    restores a line that reads back as an aesni_load assignment or leaves the file alone."""
    data = b"x=1\n" + b"aesni_load=" + value + b" # bsdcrypt enable: " + tag + eol
    files = [(CONF, data)]
    damaged = damaged_markers(files)
    edits = restore(files)
    plan = plan_disable(files)
    if damaged:
        assert edits == [] and plan.refusal is not None and not plan.writes
        return
    for e in edits:
        assert e.after.startswith(b"x=1\n") and e.after.count(b"\n") == data.count(b"\n")
        assert [ln.number for ln in parse(e.after) if ln.kind == "malformed"] == []
        assert [a.name for a in assignments(CONF, e.after)] == ["x", "aesni_load"]

