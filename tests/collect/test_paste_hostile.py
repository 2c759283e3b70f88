"""Pastes as they really arrive, and ones built to mislead: what they do not show stays unknown.

Found by auditing issue 15 as a hostile user. Every part is a real output from fixtures/ (cut, indented,
quoted or glued the way forums and mailing lists mangle them); nothing here invents an output format.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from bsdcrypt.assess import assess
from bsdcrypt.assess.findings import findings
from bsdcrypt.collect.paste import evidence_from_paste
from bsdcrypt.status import Status

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _body(path: Path) -> str:
    return path.read_text(errors="replace").split("\n# ---\n", 1)[1]


DMESG_122 = _body(FIXTURES / "pastes" / "bsdhw-12.2-ryzen-2400g-aesni-preloaded-geli-hardware.txt")
DMESG_142 = _body(FIXTURES / "pastes" / "freebsd-ask-14.2-n100-radxa-x4-aesni-builtin.txt")
GELI_SW = _body(FIXTURES / "parsers" / "geli" / "bsdnow-feedback-13.0-sw.txt")  # starts with "$ geli list"
KLD_V = _body(FIXTURES / "parsers" / "kldstat" / "derived-14-kldstat-v-aesni-ko-loaded.txt")
UNAME_122 = "FreeBSD web1 12.2-RELEASE-p7 FreeBSD 12.2-RELEASE-p7 GENERIC  amd64\n"  # shared/real-outputs/version/bsdnow425


def _status(text: str) -> Status:
    ev = evidence_from_paste(text)
    assert ev is not None, "not taken for a paste"
    return assess(ev, "h", "paste:h")


def _ids(s: Status) -> dict[str, str]:
    return {f.id: f.severity for f in findings(s)}


def _banner_line(dmesg: str) -> str:
    return next(line for line in dmesg.splitlines() if line.startswith("FreeBSD 14.2-RELEASE"))


def test_a_banner_whose_machine_cannot_be_read_leaves_the_driver_unknown_not_unsupported() -> None:
    # the banner's last word mangled (a paste that ran the next line on): the release is known, the
    # architecture is not -- that is no "architecture without an AES driver"
    line = _banner_line(DMESG_142)
    head = DMESG_142[: DMESG_142.index(line) + len(line) + 1]  # the copyright lines and the banner
    for mangled in (line + "AAAA", line.rsplit(" ", 1)[0]):
        for text in (head, DMESG_142):
            s = _status(text.replace(line, mangled))
            assert s.os.release == "14.2-RELEASE" and s.os.arch is None
            ids = _ids(s)
            assert "arch-unsupported" not in ids
            assert s.verdict == "unknown"
            assert all("None" not in f.message for f in findings(s))
        # the banner alone: nothing tells the driver; the whole boot's aesni0 line names it (x86)
        assert _ids(_status(head.replace(line, mangled))).get("arch-unknown") == "unknown"
        assert _status(DMESG_142.replace(line, mangled)).driver.name == "aesni"


def test_a_wrapped_dmesg_without_the_boots_start_proves_no_absence() -> None:
    # `dmesg` of a host up for long: the message buffer kept the root mount and what followed, not the
    # banner nor the probe lines before it, aesni0's among them (it was there: the loader preloaded it)
    lines = DMESG_122.splitlines()
    cut = next(i for i, line in enumerate(lines) if line.startswith("pci10: "))
    assert any(line.startswith("aesni0: ") for line in lines[:cut])
    tail = "\n".join(lines[cut:]) + "\n"
    s = _status("$ uname -a\n" + UNAME_122 + "$ dmesg\n" + tail)
    assert s.os.kernel_ident == "GENERIC" and s.os.release == "12.2-RELEASE-p7"
    assert s.driver.at_boot is None
    assert "not-loaded-at-boot" not in _ids(s)
    # the whole boot, banner and all, still proves the driver's absence at that boot
    whole = [ln for ln in lines if not ln.startswith("aesni0: ")]
    s = _status("$ uname -a\n" + UNAME_122 + "$ dmesg\n" + "\n".join(whole) + "\n")
    assert s.driver.at_boot is False


def test_a_paste_cut_inside_the_features2_list_does_not_say_no_aes_ni() -> None:
    # a forum's length limit (or a copy that stopped) cut the line after PCLMULQDQ: the AESNI name is
    # not there, but the hex value before the list has bit 25 set
    cut = DMESG_142.index("Features2=0x7ffafbbf<SSE3,PCLMULQDQ") + len("Features2=0x7ffafbbf<SSE3,PCLMULQDQ")
    s = _status(DMESG_142[:cut])
    assert s.cpu.aesni is True
    assert s.cpu.sha is None  # the Structured Extended Features line would have come later
    assert "cpu-no-aesni" not in _ids(s)


def _fields(s: Status) -> dict[str, object]:
    d, p, c, o = s.driver, s.persist, s.cpu, s.os
    out: dict[str, object] = {
        "os.release": o.release, "os.arch": o.arch, "os.kernel_ident": o.kernel_ident,
        "cpu.aesni": c.aesni, "cpu.sha": c.sha, "cpu.vm": c.vm, "cpu.hypervisor": c.hypervisor,
        "driver.name": d.name, "driver.state": d.state, "driver.attached": d.attached,
        "driver.accelerates_aes": d.accelerates_aes, "driver.compiled_in": d.compiled_in,
        "driver.at_boot": d.at_boot, "persist.configured": p.configured,
    }
    for g in s.geli:
        out[f"geli.{g.name}.accelerated"] = g.accelerated
    return out


PASTES = sorted((FIXTURES / "pastes").glob("*.txt"))


def _cuts(text: str) -> list[tuple[str, str]]:
    """The paste cut short (a copy that stopped: every tenth of it, at a line end and inside a line) and
    wrapped (the start lost, as a `dmesg` whose buffer wrapped): (what was done, the text)."""
    lines = text.splitlines(keepends=True)
    out: list[tuple[str, str]] = []
    for k in range(1, 10):
        n = len(lines) * k // 10
        if 0 < n < len(lines):
            out.append((f"first {n} lines", "".join(lines[:n])))
            out.append((f"first {n} lines and half a line", "".join(lines[:n]) + lines[n][: len(lines[n]) // 2]))
            out.append((f"last {len(lines) - n} lines", "".join(lines[n:])))
    return out


@pytest.mark.parametrize("path", PASTES, ids=[p.stem for p in PASTES])
def test_a_cut_or_wrapped_real_paste_only_moves_toward_unknown(path: Path) -> None:
    from bsdcrypt.parsers.dmesg import parse_dmesg

    text = _body(path)
    full_ev = evidence_from_paste(text)
    assert full_ev is not None
    full = assess(full_ev, "h", "paste:h")
    want = _fields(full)
    asserted = {f.id for f in findings(full)}
    boots = parse_dmesg(text).boots
    checked = 0
    for what, cut in _cuts(text):
        if what.startswith("first") and parse_dmesg(cut).boots < boots:
            continue  # cut before the last boot began: what is left is an earlier boot, other evidence
        ev = evidence_from_paste(cut)
        if ev is None:
            continue  # not taken for a paste at all: an unknown row
        part = assess(ev, "h", "paste:h")
        checked += 1
        for key, value in _fields(part).items():
            if key.startswith("geli.") and key not in want:
                pytest.fail(f"{what}: a GELI provider the whole paste does not show: {key}")
            assert value in (None, "unknown") or value == want[key], f"{what}: {key} {want[key]!r} -> {value!r}"
        new = {f.id for f in findings(part) if f.severity != "unknown"} - asserted - {"paste-partial"}
        assert not new, f"{what}: findings the whole paste does not give: {sorted(new)}"
        assert part.verdict in (full.verdict, "unknown"), f"{what}: verdict {full.verdict} -> {part.verdict}"
    assert checked >= 3


def test_the_bits_read_from_a_cut_list_are_those_real_outputs_name() -> None:
    # FIELD_BITS against every closed Features2 / Structured Extended Features list in the real dmesgs
    import re

    from bsdcrypt.parsers.dmesg import FIELD_BITS

    line_re = re.compile(r"^\s*(Features2|Structured Extended Features2?)=0x([0-9a-fA-F]+)<(.*)>\s*$", re.M)
    seen: dict[str, int] = {}
    for path in [*PASTES, *sorted((FIXTURES / "parsers" / "dmesg").glob("*.txt"))]:
        for m in line_re.finditer(path.read_text(errors="replace")):
            field, word, names = m.group(1), int(m.group(2), 16), set(m.group(3).split(","))
            for name, bit in FIELD_BITS[field].items():
                assert (name in names) == bool(word >> bit & 1), f"{path.name}: {field} {name} bit {bit}"
                seen[name] = seen.get(name, 0) + (name in names)
    assert all(seen.get(n, 0) >= 3 for bits in FIELD_BITS.values() for n in bits), seen


def _gelis(s: Status) -> dict[str, str | None]:
    return {g.name: g.crypto for g in s.geli}


def test_a_paste_indented_as_a_markdown_code_block_is_read_as_the_same_paste() -> None:
    # forums and Reddit show code as lines indented by four spaces (or a tab): prompts, geli list and
    # loader.conf lines all start indented then
    text = ("$ uname -a\n" + UNAME_122 + GELI_SW + "\n$ cat /boot/loader.conf\naesni_load=\"YES\"\n")
    plain = _status(text)
    assert _gelis(plain) == {"ada0p2.eli": "software"} and plain.persist.source == "/boot/loader.conf:1"
    for indent in ("    ", "\t"):
        s = _status("".join(indent + line if line.strip() else line for line in text.splitlines(keepends=True)))
        assert _gelis(s) == _gelis(plain)
        assert s.persist.source == plain.persist.source and s.persist.value == "YES"
        assert s.os.release == plain.os.release
        # only the output indented, under flush-left prompts
        out_only = "".join(line if line[:1] in "$" or not line.strip() else indent + line
                           for line in text.splitlines(keepends=True))
        s = _status(out_only)
        assert _gelis(s) == _gelis(plain) and s.persist.value == "YES"


def test_a_paste_quoted_in_a_mail_reply_is_read_as_the_same_paste() -> None:
    plain = _status(DMESG_142)
    for quote in ("> ", ">", "> > "):
        s = _status("".join(quote + line for line in DMESG_142.splitlines(keepends=True)))
        assert _fields(s) == _fields(plain), quote


def test_output_pasted_after_a_prompted_one_without_its_own_prompt_is_not_swallowed() -> None:
    # "$ geli list" with its output, then kldstat -v's output glued on without a prompt: the kldstat
    # header starts its own part, it is no line of geli list
    s = _status("$ uname -a\n" + UNAME_122 + GELI_SW + "\n" + KLD_V)
    assert _gelis(s) == {"ada0p2.eli": "software"}
    assert s.driver.state == "loaded" and s.driver.reason is None
    # likewise after a command bsdcrypt does not read, and a dmesg after a uname -a line
    pkg = _body(FIXTURES / "pastes" / "shared-bsdnow425-uname-a-12.2-p7-with-pkg-info.txt").splitlines(keepends=True)
    s = _status("# pkg info -x opcache apache24 php74-7.4\n" + "".join(pkg[2:]) + KLD_V + UNAME_122)
    assert s.driver.state == "loaded"
    s = _status("$ uname -a\n" + UNAME_122 + DMESG_142)
    assert s.driver.attached is True and s.cpu.aesni is True


def test_a_plain_kldstat_is_not_reported_as_missing() -> None:
    # `kldstat` without -v was pasted: it lists files, so the reason must not say it was not pasted
    plain_kld = "Id Refs Address                Size Name\n 1   20 0xffffffff80200000  1d0a5c8 kernel\n"
    s = _status("$ uname -a\n" + UNAME_122 + "$ kldstat\n" + plain_kld)
    # 12.2 GENERIC does not compile aesni in and plain kldstat lists every file loaded: not loaded, inferred
    # (issue 27; tests/test_inference_rules.py), never "missing"
    assert s.driver.state == "not-loaded"
    assert s.driver.inferred is not None and "plain kldstat" in s.driver.inferred


@pytest.mark.parametrize("path", PASTES, ids=[p.stem for p in PASTES])
def test_every_real_paste_reads_the_same_indented_quoted_or_with_crlf(path: Path) -> None:
    text = _body(path)
    plain = _status(text)
    lines = text.splitlines(keepends=True)
    for what, mangled in (
        ("indented", "".join("    " + ln if ln.strip() else ln for ln in lines)),
        ("quoted", "".join("> " + ln for ln in lines)),
        ("crlf", text.replace("\n", "\r\n")),
    ):
        s = _status(mangled)
        assert _fields(s) == _fields(plain), what
        assert sorted(f.id for f in findings(s)) == sorted(f.id for f in findings(plain)), what


def test_paste_partial_says_what_the_other_parts_told_instead_of_calling_it_unknown() -> None:
    # a bare 12.2 dmesg.boot decides the driver (preloaded aesni.ko), persistence and the boot's GELI
    # providers: the finding must not say those fields stay unknown
    msg = next(f.message for f in _status(DMESG_122).findings if f.id == "paste-partial")
    assert "kldstat -v (whether the driver is compiled in, loaded or absent now; here aesni loaded, told from dmesg.boot)" in msg
    assert "here told from loader (preloaded at boot: dmesg.boot)" in msg
    assert "here the providers attached at boot, from dmesg.boot" in msg
    assert "here as at boot, from dmesg.boot" in msg
    assert "those fields stay unknown" not in msg
    # a uname -a line alone decides none of them
    msg = next(f.message for f in _status(UNAME_122).findings if f.id == "paste-partial")
    driver_part = msg.split(" Kernel crypto consumers'")[0]  # the consumers' part: tests/collect/test_paste_consumers.py
    assert "here" not in driver_part and "what only they show stays unknown" in driver_part


def test_a_banner_whose_release_cannot_be_read_is_not_called_an_unknown_config() -> None:
    # control characters inside the release word (a terminal's colour codes copied along): GENERIC is
    # known, the release is not -- the reason must say that, not "a config bsdcrypt does not know"
    line = _banner_line(DMESG_142)
    s = _status(DMESG_142.replace(line, line.replace("14.2-RELEASE", "14.2-RELEASE\x1b[31m")))
    assert s.os.release is None and s.os.kernel_ident == "GENERIC" and s.driver.state == "unknown"
    assert s.driver.reason is not None and "GENERIC kernel of a release not shown" in s.driver.reason


def test_a_paste_without_release_or_architecture_says_so_and_what_it_shows() -> None:
    # the VMware disk excerpt and a geli list alone: no banner, no uname -a
    vmware = _body(FIXTURES / "pastes" / "freebsd-ask-vmware-nvme-disk-excerpt.txt")
    for text, shows in ((vmware, "a vmware guest"), (GELI_SW, "GELI providers")):
        msg = next(f.message for f in findings(_status(text)) if f.id == "probe-incomplete")
        assert msg.startswith("The paste shows neither the release nor the architecture") and shows in msg
        assert "probe output" not in msg


def test_a_new_user_learns_that_analyze_reads_a_pasted_dmesg_boot() -> None:
    # the README and `analyze --help` are where a user with a forum paste looks first

    readme = (FIXTURES.parent / "README.md").read_text()
    assert "bsdcrypt analyze paste.txt" in readme and "dmesg.boot" in readme
    out = run_cli("analyze", "--help", env={"COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"}, check=True).stdout
    assert "pastes" in out and "dmesg.boot" in out


@pytest.mark.parametrize("line", ["sysctl a" + " " * 1_000_000 + "!", "$ ifconfig -g wg\n" + "x" * 1_000_000])
def test_a_long_hostile_paste_line_is_read_in_bounded_time(line: str) -> None:
    # `sysctl [\w.% -]*\s*$` backtracked quadratically over a blank run inside a bare command line
    import subprocess
    import sys

    code = ("import sys\nfrom bsdcrypt.collect.paste import evidence_from_paste\n"
            "evidence_from_paste(sys.stdin.read())\n")
    subprocess.run([sys.executable, "-c", code], input=line, text=True, check=True, timeout=240)
