"""bsdcrypt.collect.paste: a paste of several outputs splits into the probe steps they stand for.

The parts are real outputs (fixtures/pastes/, fixtures/loaderconf/); the tests glue them together the
way people paste them, in both orders, with and without shell prompts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bsdcrypt.assess import assess
from bsdcrypt.collect.paste import evidence_from_paste, split

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _body(path: Path) -> str:
    return path.read_text(errors="replace").split("\n# ---\n", 1)[1]


DMESG = _body(FIXTURES / "pastes" / "bsdhw-12.2-ryzen-2400g-aesni-preloaded-geli-hardware.txt")
GELI = _body(FIXTURES / "pastes" / "shared-bsdnow-feedback-13.0-sw.txt").replace("$ geli list\n", "")
KLD = (
    "Id Refs Address                Size Name\n"
    " 1   20 0xffffffff80200000  2155f30 kernel\n"
)  # the header and first line as kldstat.c prints them (see fixtures/parsers/kldstat/)
LOADER = _body(FIXTURES / "loaderconf" / "remetremet-router-aesni-tabs-comments.txt")
UNAME = "FreeBSD web1 12.2-RELEASE-p7 FreeBSD 12.2-RELEASE-p7 GENERIC  amd64\n"  # shared/real-outputs/version/bsdnow425


def _steps(text: str) -> dict[str, bytes]:
    ev = evidence_from_paste(text)
    assert ev is not None and ev.origin == "paste"
    return {k: v.out for k, v in ev.steps.items()}


@pytest.mark.parametrize("prompts", [False, True])
@pytest.mark.parametrize("order", ["dmesg-first", "dmesg-last"])
def test_parts_land_in_their_steps_in_any_order(prompts: bool, order: str) -> None:
    parts = [("cat /var/run/dmesg.boot", DMESG), ("kldstat", KLD), ("uname -a", UNAME),
             ("geli list", GELI), ("cat /boot/loader.conf", LOADER)]
    if order == "dmesg-last":
        parts = parts[1:] + parts[:1]
    text = "".join((f"root@web1:~ # {cmd}\n" if prompts else "") + out + "\n" for cmd, out in parts)
    steps = _steps(text)
    assert set(steps) == {"file:/var/run/dmesg.boot", "kldstat_v", "uname_a", "uname_s", "geli_list",
                          "file:/boot/loader.conf"}
    assert b"aesni0: <AES-CBC" in steps["file:/var/run/dmesg.boot"]
    assert b"Geom name: ada0p2.eli" in steps["geli_list"] and b"Geom name" not in steps["file:/var/run/dmesg.boot"]
    assert b"aesni_load" in steps["file:/boot/loader.conf"] and b"aesni_load" not in steps["file:/var/run/dmesg.boot"]
    assert steps["uname_s"] == b"FreeBSD\n"
    assert b"kernel" in steps["kldstat_v"] and b"0xffffffff80200000" not in steps["file:/var/run/dmesg.boot"]


def test_the_same_report_with_and_without_prompts() -> None:
    bare = evidence_from_paste(DMESG + UNAME + GELI)
    prompted = evidence_from_paste(f"$ dmesg\n{DMESG}$ uname -a\n{UNAME}% geli list\n{GELI}")
    assert bare is not None and prompted is not None
    a, b = assess(bare, "h", "paste:x").to_dict(), assess(prompted, "h", "paste:x").to_dict()
    a.pop("findings"), b.pop("findings")
    assert a == b


def test_a_comment_line_is_not_a_prompt() -> None:
    p = split("# load aesni at boot\naesni_load=\"YES\"\n# kldstat shows it\n" + UNAME)
    assert p.files["/boot/loader.conf"][:2] == ["# load aesni at boot", 'aesni_load="YES"']
    assert p.uname == [UNAME.strip()]


def test_a_prompted_cat_names_the_loader_file() -> None:
    steps = _steps(f"$ cat /boot/loader.conf.local\naesni_load=\"NO\"\n$ uname -a\n{UNAME}")
    assert steps["file:/boot/loader.conf.local"] == b'aesni_load="NO"\n'
    assert "file:/boot/loader.conf" not in steps  # not pasted: unknown, not empty


def test_a_grep_of_dmesg_proves_only_what_it_shows() -> None:
    pentium3 = _body(FIXTURES / "pastes" / "bsdhw-13.1-i386-pentium3-no-features2-aesni-no-device.txt")
    lines = [ln for ln in pentium3.splitlines() if "Features" in ln or "CPU:" in ln or ln.startswith("FreeBSD 13")]
    grep = "$ dmesg | grep -e Features -e CPU: -e FreeBSD\n" + "\n".join(lines) + "\n"
    s = assess(evidence_from_paste(grep) or pytest.fail("no evidence"), "h", "paste:x")
    # the full dmesg proves no AES-NI (no Features2 line); a grep could have dropped that line
    assert s.cpu.aesni is None
    full = assess(evidence_from_paste(pentium3) or pytest.fail("no evidence"), "h", "paste:x")
    assert full.cpu.aesni is False


def test_crlf_and_markdown_fences_are_taken_off() -> None:
    text = ("```\n" + DMESG + UNAME + "```\n").replace("\n", "\r\n")
    steps = _steps(text)
    assert b"\r" not in steps["file:/var/run/dmesg.boot"] and b"```" not in steps["file:/var/run/dmesg.boot"]
    assert steps["uname_a"] == UNAME.encode()


@pytest.mark.parametrize("text", [
    "", "\n\n", "hello world\n", "# bsdcrypt\n\nA README that mentions aesni_load and kldstat.\n",
    'aesni_load="YES"\n',  # a loader.conf alone names no host
    "\x00\x01\x02garbage\x7f\n" * 50,
    "nda1 at nvme0 bus 0 scbus2 target 0 lun 2\nnda1: <Samsung SSD 970 EVO 500GB 2B2QEXE7>\n",  # names nothing
])
def test_text_that_is_no_paste_is_refused(text: str) -> None:
    assert evidence_from_paste(text) is None


def test_device_lines_that_name_the_hypervisor_are_a_paste() -> None:
    """A dmesg excerpt of a VMware virtual disk says one thing an expert reads: this is a VMware guest."""
    ev = evidence_from_paste("nda1: <VMware Virtual NVMe Disk 1.4 VMware NVME_0000>\nnda1: nvme version 1.4\n")
    assert ev is not None and set(ev.steps) == {"file:/var/run/dmesg.boot"}
