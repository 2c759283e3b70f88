"""loader.conf parsing as the lua loader does it: table tests over real files and nasty cases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.facts import Assignment
from bsdcrypt.loader.conf import all_assignments, effective, files_from_evidence, is_yes, loader_order, order_ambiguous
from bsdcrypt.parsers.loaderconf import assignments, classify, malformed, parse
from bsdcrypt.probe import Evidence, Step

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "loaderconf"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


# (fixture, expected effective aesni_load value or None, number of assignments)
REAL = [
    ("bsdrp-netbenches-apu2-ipsec-loader-conf-local-aesni.txt", "YES", 8),
    ("cunnie-firewall-cryptodev-no-aesni.txt", None, 15),
    ("darkain-loader-conf-no-aesni.txt", None, 7),
    ("geli-nvme-keyfile-aesni.txt", "YES", 14),
    ("mybee-installer-loader-append.txt", "YES", 19),
    ("remetremet-router-aesni-tabs-comments.txt", "YES", 34),
    ("vulture-hardenedbsd-aesni-spaces.txt", "YES", 36),
]


@pytest.mark.parametrize(("name", "expected", "count"), REAL)
def test_real_files(name: str, expected: str | None, count: int) -> None:
    data = fixture(name)
    got = effective([("/boot/loader.conf", data)], "aesni_load")
    assert (got.value if got else None) == expected
    assert len(assignments("/boot/loader.conf", data)) == count
    assert malformed(data) == []  # every real file parses cleanly (the `# source:` header is a comment)


def test_real_spaces_around_equals_and_unquoted() -> None:
    data = fixture("vulture-hardenedbsd-aesni-spaces.txt")
    by_name = {a.name: a for a in assignments("/boot/loader.conf", data)}
    assert by_name["kern.ipc.somaxconn"].value == "2048"
    assert by_name["vfs.zfs.arc_max"].value == "128M"
    assert by_name["kern.vty"].value == "sc"
    assert by_name["aesni_load"].line == 4


def test_real_tab_comment_and_duplicates() -> None:
    bsdrp = fixture("bsdrp-netbenches-apu2-ipsec-loader-conf-local-aesni.txt")
    by_name = {a.name: a for a in assignments("/boot/loader.conf.local", bsdrp)}
    assert by_name["hw.usb.no_pf"].value == "1"
    cunnie = fixture("cunnie-firewall-cryptodev-no-aesni.txt")
    dup = all_assignments([("/boot/loader.conf", cunnie)], "cryptodev_load")
    assert [a.line for a in dup] == [6, 10]


def test_commented_lines_do_not_count() -> None:
    data = fixture("remetremet-router-aesni-tabs-comments.txt")
    names = {a.name for a in assignments("/boot/loader.conf", data)}
    assert "glxsb_load" not in names and "geom_eli_load" not in names


def A(value: str, line: int = 1, path: str = "/boot/loader.conf") -> Assignment:
    return Assignment(path=path, line=line, name="aesni_load", value=value)


# (content, expected effective assignment)
NASTY: list[tuple[bytes, Assignment | None]] = [
    (b'aesni_load="YES"\n', A("YES")),
    (b'aesni_load="YES"', A("YES")),  # no final newline
    (b'aesni_load="YES"\r\n', A("YES")),  # CRLF: the CR is whitespace
    (b"aesni_load=YES\r\n", A("YES")),
    (b"aesni_load=NO\n", A("NO")),
    (b'aesni_load="NO"\n', A("NO")),
    (b'aesni_load = "YES"\n', A("YES")),
    (b'\t aesni_load\t=\t"yes"\t# tab comment\n', A("yes")),
    (b'aesni_load="YES"#glued comment\n', A("YES")),
    (b'#aesni_load="YES"\n', None),
    (b'  # aesni_load="YES"\n', None),
    (b'aesni_load="YES"\naesni_load="NO"\n', A("NO", 2)),
    (b'aesni_load="NO"\n\n\naesni_load="YES"\n', A("YES", 4)),
    (b'aesni_load="YES" junk\n', None),  # malformed: skipped by the loader
    (b'aesni_load="YES" junk\naesni_load="NO"\n', A("NO", 2)),
    (b'aesni_load="YES"  "x"\n', A('YES"  "x')),  # greedy quote: not yes
    (b"aesni_load=\n", None),  # malformed
    (b'aesni_load=""\n', A("")),
    (b"aesni_load='YES'\n", None),  # single quotes are not quotes to the loader
    (b'\xff\xfe garbage \xe9\naesni_load="YES"\n', A("YES", 2)),  # non-UTF-8 line: malformed, skipped
    (b'x="\xe9t\xe9"\naesni_load="YES"\n', A("YES", 2)),
    (b'noaesni_load="YES"\n', None),
    (b'aesni_loader="YES"\n', None),
    (b'aesni_load="YES"\r', A("YES")),
    (b'\r\n\r\naesni_load="YES"\r\n', A("YES", 3)),
]


@pytest.mark.parametrize(("content", "expected"), NASTY)
def test_nasty(content: bytes, expected: Assignment | None) -> None:
    assert effective([("/boot/loader.conf", content)], "aesni_load") == expected


def test_value_is_case_insensitive_for_is_yes() -> None:
    assert is_yes(A("yes")) and is_yes(A("Yes")) and not is_yes(A("YES ")) and not is_yes(None)
    assert not is_yes(A("NO")) and not is_yes(A("1"))


def test_parse_keeps_every_byte() -> None:
    data = b'a="1"\r\n\n#c\naesni_load = NO\t# x\n\xff\xfe\nlast="z"'
    lines = parse(data)
    rebuilt = b"".join(ln.text + (b"\n" if ln.terminated else b"") for ln in lines)
    assert rebuilt == data
    assert [ln.kind for ln in lines] == ["assign", "blank", "comment", "assign", "malformed", "assign"]
    ln = lines[3]
    assert ln.text[ln.value_start : ln.value_end] == b"NO" and not ln.quoted


def test_module_and_env_patterns() -> None:
    got = assignments("f", b'exec="echo hi"\naesni_name="/boot/x.ko"\nhw.x-y_z.w=5\n-bad=1\n')
    assert [(a.name, a.value) for a in got] == [
        ("exec", "echo hi"),
        ("aesni_name", "/boot/x.ko"),
        ("hw.x-y_z.w", "5"),
    ]


def test_file_order_local_wins_and_confd_sorted() -> None:
    files = [
        ("/boot/loader.conf.local", b'aesni_load="NO"\n'),
        ("/boot/loader.conf.d/b.conf", b'aesni_load="YES"\n'),
        ("/boot/loader.conf.d/a.conf", b'aesni_load="NO"\n'),
        ("/boot/loader.conf", b'aesni_load="YES"\n'),
    ]
    assert [p for p, _ in loader_order(files)] == [
        "/boot/loader.conf",
        "/boot/loader.conf.d/a.conf",
        "/boot/loader.conf.d/b.conf",
        "/boot/loader.conf.local",
    ]
    assert effective(files, "aesni_load") == A("NO", path="/boot/loader.conf.local")
    # Without .local, the last conf.d file (by name) wins.
    assert effective(files[1:], "aesni_load") == A("YES", path="/boot/loader.conf.d/b.conf")
    # Pre-14.1 loaders read .local before loader.conf.d: here that flips the result.
    assert order_ambiguous(files, "aesni_load")
    assert not order_ambiguous(files[2:], "aesni_load")


def test_root_prefixed_paths_keep_order() -> None:
    files = [
        ("/mnt/boot/loader.conf.local", b'aesni_load="YES"\n'),
        ("/mnt/boot/loader.conf", b'aesni_load="NO"\n'),
    ]
    assert effective(files, "aesni_load") == A("YES", path="/mnt/boot/loader.conf.local")


def _ev(files: dict[str, bytes], missing: tuple[str, ...] = ()) -> Evidence:
    steps = {f"file:{p}": Step(0, d) for p, d in files.items()}
    for p in missing:
        steps[f"file:{p}"] = Step(1, b"cat: " + p.encode() + b": No such file or directory")
    return Evidence(steps)


def test_files_from_evidence() -> None:
    ev = _ev(
        {
            "/boot/loader.conf.local": b'aesni_load="NO"\n',
            "/boot/loader.conf.d/z.conf": b"",
            "/boot/loader.conf.d/a.conf": b'aesni_load="YES"\n',
            "/boot/loader.conf": b'zfs_load="YES"\n',
            "/var/run/dmesg.boot": b"x",
        }
    )
    files = files_from_evidence(ev)
    assert [p for p, _ in files] == [
        "/boot/loader.conf",
        "/boot/loader.conf.d/a.conf",
        "/boot/loader.conf.d/z.conf",
        "/boot/loader.conf.local",
    ]
    assert effective(files_from_evidence(ev), "aesni_load") == A("NO", path="/boot/loader.conf.local")


def test_files_from_evidence_missing_files() -> None:
    ev = _ev({"/boot/loader.conf": b'aesni_load="YES"\n'}, missing=("/boot/loader.conf.local",))
    assert files_from_evidence(ev) == [("/boot/loader.conf", b'aesni_load="YES"\n')]
    assert effective(files_from_evidence(Evidence({})), "aesni_load") is None


# --- classify() against a literal transcription of config.lua's pattern_table (stand/lua/config.lua):
# one pattern per entry, tried in order; the first match decides, a bad tail makes the line malformed.
def _lua_table() -> list[re.Pattern[bytes]]:
    sp, qval, word = rb"[ \t\n\v\f\r]*", rb'"(?P<v>.*)"', rb"(?P<v>[-A-Za-z0-9][-A-Za-z0-9_.]*)"

    def pat(name: bytes, value: bytes) -> re.Pattern[bytes]:
        return re.compile(rb"\A" + sp + name + sp + b"=" + sp + value + sp + rb"(?P<c>.*)\Z", re.S)

    table = []
    for sfx in (b"load", b"name", b"type", b"flags", b"before", b"after", b"error"):
        table += [pat(rb"(?P<n>[-A-Za-z0-9_]+_" + sfx + rb")", qval), pat(rb"(?P<n>[-A-Za-z0-9_]+_" + sfx + rb")", word)]
    table.append(pat(rb"(?P<n>exec)", qval))
    table += [pat(rb"(?P<n>[A-Za-z0-9][-A-Za-z0-9_.]*)", qval), pat(rb"(?P<n>[A-Za-z0-9][-A-Za-z0-9_.]*)", word)]
    return table


_LUA_TABLE = _lua_table()
_VALID_TAIL_REF = re.compile(rb"\A[ \t\n\v\f\r]*(?:#.*)?\Z", re.S)


def _reference(text: bytes) -> tuple[str, bytes | None, bytes | None, bool]:
    if re.match(rb"\A[ \t\n\v\f\r]*\Z", text):
        return "blank", None, None, False
    if re.match(rb"\A[ \t\n\v\f\r]*#", text):
        return "comment", None, None, False
    for i, p in enumerate(_LUA_TABLE):
        m = p.match(text)
        if m:
            if _VALID_TAIL_REF.match(m.group("c")):
                quoted = i == 14 or i == 15 or (i < 14 and i % 2 == 0)
                return "assign", m.group("n"), m.group("v"), quoted
            return "malformed", None, None, False
    return "malformed", None, None, False


_ALPHABET = b'abcXYZ019_-.="# \t\r\v\x01\xff'
_PIECES = [b"aesni_load", b"geom_eli_load", b"exec", b"_load", b"-x_name", b"a.b_load", b"kern.hz", b"_x",
           b"=", b" = ", b'"YES"', b"YES", b'"a"b"', b"# c", b'"', b"\t", b"x_error", b"1a_type", b".x"]


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.binary(max_size=3).map(
    lambda b: bytes(_ALPHABET[c % len(_ALPHABET)] for c in b))), max_size=8).map(b"".join))
def test_classify_matches_the_lua_pattern_table(text: bytes) -> None:
    kind, m, quoted = classify(text)
    ref_kind, name, value, ref_quoted = _reference(text)
    assert kind == ref_kind, text
    if kind == "assign":
        assert m is not None
        assert (m.group("n"), m.group("v"), quoted) == (name, value, ref_quoted), text
