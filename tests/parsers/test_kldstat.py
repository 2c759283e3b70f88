from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.parsers.kldstat import file_containing, parse_kldstat

from ._load import load, names

# fixture -> [(id, name, path, size, modules)]
CASES: dict[str, list[tuple[int, str, str | None, int | None, tuple[str, ...]]]] = {
    "ansible-kld-issue6-aesni-module-grep.txt": [
        (4, "aesni.ko", "/boot/kernel/aesni.ko", 0xBD50, ("nexus/aesni",)),
        (5, "cryptodev.ko", "/boot/kernel/cryptodev.ko", 0x84B0, ()),
    ],
    "cyberciti-i386-reflowed.txt": [
        (1, "kernel", None, 0x52679C, ()),
        (3, "acpi.ko", None, 0x4A6AC, ()),
        (8, "smbfs.ko", None, 0x1F000, ()),
        (9, "libiconv.ko", None, 0x3000, ()),
        (10, "libmchain.ko", None, 0x3000, ()),
    ],
    "n0fate-i386-kldstat-v-html-br.txt": [
        (1, "kernel", "/boot/kernel/kernel", 0xBD97B4, ("ataraid", "if_lo", "elf32", "shell", "pseudofs")),
    ],
    "nanxiao-kldstat-v-truncated.txt": [
        (1, "kernel", "/boot/kernel/kernel", 0x17BC6A8, ("if_lo", "newreno", "elf32", "elf64", "shell")),
        (2, "fdescfs.ko", None, 0x56C6, ()),
        (3, "uhid.ko", None, 0x2BA8, ()),
    ],
    "derived-14-kldstat-v-aesni-in-kernel.txt": [
        (1, "kernel", "/boot/kernel/kernel", 0x1F3C6C0,
         ("crypto", "nexus/cryptosoft", "nexus/aesni", "if_lo", "g_part")),
        (2, "geom_eli.ko", "/boot/kernel/geom_eli.ko", 0x5B8D8, ("g_eli",)),
    ],
    "derived-14-kldstat-v-aesni-ko-loaded.txt": [
        (1, "kernel", "/boot/kernel/kernel", 0x1D0A5C8, ("crypto", "nexus/cryptosoft")),
        (4, "aesni.ko", "/boot/kernel/aesni.ko", 0xC2F8, ("nexus/aesni",)),
        (5, "ossl.ko", "/boot/kernel/ossl.ko", 0x3390, ("nexus/ossl",)),
    ],
    "derived-i386-kldstat-plain.txt": [
        (1, "kernel", None, 0x1A4C9E8, ()),
        (2, "aesni.ko", None, 0x9A2C, ()),
    ],
}


def test_every_fixture_has_a_case() -> None:
    assert set(names("kldstat")) == set(CASES)


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_kldstat_fixture(fixture: str) -> None:
    got = [(f.id, f.name, f.path, f.size, f.modules) for f in parse_kldstat(load("kldstat", fixture))]
    assert got == CASES[fixture]


@pytest.mark.parametrize(
    ("fixture", "module", "expected"),
    [
        ("derived-14-kldstat-v-aesni-in-kernel.txt", "nexus/aesni", "kernel"),
        ("derived-14-kldstat-v-aesni-in-kernel.txt", "aesni", "kernel"),
        ("derived-14-kldstat-v-aesni-in-kernel.txt", "nexus/ossl", None),
        ("derived-14-kldstat-v-aesni-in-kernel.txt", "g_eli", "geom_eli.ko"),
        ("derived-14-kldstat-v-aesni-ko-loaded.txt", "nexus/aesni", "aesni.ko"),
        ("derived-14-kldstat-v-aesni-ko-loaded.txt", "ossl", "ossl.ko"),
        ("ansible-kld-issue6-aesni-module-grep.txt", "nexus/aesni", "aesni.ko"),
        ("cyberciti-i386-reflowed.txt", "nexus/aesni", None),
    ],
)
def test_file_containing(fixture: str, module: str, expected: str | None) -> None:
    f = file_containing(parse_kldstat(load("kldstat", fixture)), module)
    assert (f.name if f else None) == expected


def test_address_and_refs() -> None:
    files = parse_kldstat(load("kldstat", "derived-14-kldstat-v-aesni-in-kernel.txt"))
    assert files[0].address == "0xffffffff80200000"
    assert files[0].refs == 45


@pytest.mark.parametrize(
    "text",
    [
        "",
        "kldstat: can't find module aesni: No such file or directory\n",
        "Id  Refs Name\n  2    1 linuxelf\n",  # kldstat -m is not a file listing
        "Id Refs Address                Size Name\n",
        "random words 1 2 3\n\x00\x01",
    ],
)
def test_garbage_gives_empty(text: str) -> None:
    assert parse_kldstat(text) == []


def test_humanized_size_is_unknown() -> None:
    text = "Id Refs Address                 Size Name\n 1   45 0xffffffff80200000   31M kernel\n"
    [f] = parse_kldstat(text)
    assert f.name == "kernel" and f.size is None


def test_kldstat_d_module_data_is_skipped() -> None:
    text = (
        " 2    1 0xffffffff8213e000    5b8d8 geom_eli.ko (/boot/kernel/geom_eli.ko)\n"
        "\tContains modules:\n\t\t Id Name\n\t\t480 g_eli (0, 0, 0x0)\n\t\t481 other (1, 2, 0x3)\n"
    )
    [f] = parse_kldstat(text)
    assert f.modules == ("g_eli", "other")


@given(st.text())
def test_never_raises_text(text: str) -> None:
    for f in parse_kldstat(text):
        assert isinstance(f.id, int)


@given(st.binary())
def test_never_raises_bytes(data: bytes) -> None:
    parse_kldstat(data.decode("utf-8", errors="replace"))
