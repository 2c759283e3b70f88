"""loaderconf.meaningful: the lines the loader acts on, without a Line for every blank or comment line."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.loader.model import simulate
from bsdcrypt.parsers.loaderconf import assignments, malformed, meaningful, parse

TEXT = (b'# comment\n\n  \t\naesni_load="YES"\nnot a line\n\r\n#x\r\ncryptodev_load=YES # on\n'
        b'geom_eli_load="NO"\r\nlast="1"')
LINES = st.lists(st.sampled_from([b"", b" ", b"\t# c", b"#", b"\r", b"x", b'aesni_load="YES"', b"aesni_load=NO",
                                  b'loader_conf_files="/boot/x.conf"', b"a=b\r", b'module_blacklist="aesni"']),
                 max_size=12)


def test_meaningful_is_parse_without_blank_and_comment_lines() -> None:
    lines = parse(TEXT)
    kept = [ln for ln in lines if ln.kind in ("assign", "malformed") or b"\r" in ln.text]
    assert meaningful(TEXT) == kept
    assert [ln.number for ln in kept] == [4, 5, 6, 7, 8, 9, 10]  # numbers and offsets as in the file
    assert [a.name for a in assignments("/boot/loader.conf", TEXT)] == [
        "aesni_load", "cryptodev_load", "geom_eli_load", "last"]
    assert malformed(TEXT) == [ln.number for ln in lines if ln.kind == "malformed"] == [5]


def test_a_file_of_newlines_or_comments_makes_no_lines() -> None:
    """Bounded work: a 1 MiB file of blank or comment lines (a hostile host's) makes no Line at all."""
    assert meaningful(b"\n" * (1 << 20)) == []
    assert meaningful(b"#\n" * (1 << 19)) == []
    assert assignments("/boot/loader.conf", b"x\n" * (1 << 19)) == []


@given(LINES, LINES)
def test_the_loader_model_reads_the_same_without_them(a: list[bytes], b: list[bytes]) -> None:
    """Every generation (the Forth one stops at a malformed or CR line) runs the same on every line of
    the files as on the meaningful ones."""
    files = [("/boot/loader.conf", b"\n".join(a) + b'\nloader_conf_files="/boot/x.conf"\n'),
             ("/boot/x.conf", b"\r\n".join(b))]
    for gen in ("forth", "lua12", "lua13", "lua14"):
        every_line = {data: parse(data) for _, data in files}
        assert simulate(files, "aesni", gen, parsed=every_line) == simulate(files, "aesni", gen)
