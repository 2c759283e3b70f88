"""status on a host whose CPU hides AES-NI, from real pieces: the real Debian recording, its CPU flags line
with aes/pclmulqdq taken out (the hidden case) and OpenSSL 3.0.19's real outputs (fixtures/parsers/
openssl_version), the CPUINFO line being qemu-user's Nehalem model (a CPU without AES-NI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsdcrypt.assess import assess
from bsdcrypt.probe import Evidence, Step
from bsdcrypt.recording import load
from bsdcrypt.render.status import nagios, table

ROOT = Path(__file__).resolve().parents[2]
OV = ROOT / "fixtures" / "parsers" / "openssl_version"


def _body(name: str) -> str:
    text = (OV / name).read_text()
    return text.split("# ---\n", 1)[1]


def _debian(flags_without: set[str], *, vm: bool = True, cpuinfo: str | None = None,
            overrides: str | None = None, libressl: bool = False) -> Evidence:
    _, ev = load(ROOT / "fixtures" / "hosts" / "linux-debian12-local.yaml")
    steps = dict(ev.steps)
    line = steps["linux_cpu_flags"].text
    out = []
    for ln in line.splitlines():
        if ln.startswith("flags"):
            head, _, rest = ln.partition(":")
            keep = [f for f in rest.split() if f not in flags_without and (vm or f != "hypervisor")]
            ln = head + ": " + " ".join(keep)
        out.append(ln)
    steps["linux_cpu_flags"] = Step(0, ("\n".join(out) + "\n").encode())
    version = _body("macos-libressl-3.3.6-version-a.txt") if libressl else _body("debian12-openssl-3.0.19-version-a.txt")
    if cpuinfo is not None:
        version = "\n".join(x for x in version.splitlines() if not x.startswith("CPUINFO")) + "\n" + cpuinfo
    steps["openssl:/usr/bin/openssl"] = Step(0, version.encode())
    steps["openssl:/usr/local/bin/openssl"] = Step(1, b"")
    steps["crypto_links"] = Step(0, b"== /usr/bin/tor\n\tlibcrypto.so.3 => /lib/x86_64-linux-gnu/libcrypto.so.3 (0x7f)\n")
    steps["ia32cap_overrides"] = Step(0, (overrides or "").encode())
    return Evidence(steps)


NEHALEM = _body("qemu-nehalem-openssl-3.0.19-version-c.txt")


def ids(ev: Evidence) -> list[str]:
    return [f.id for f in assess(ev, "h", "test").findings]


def test_hidden_by_the_hypervisor() -> None:
    s = assess(_debian({"aes", "pclmulqdq"}, cpuinfo=NEHALEM), "h", "test")
    assert s.userland_aes.case == "hidden-by-hypervisor"
    assert "userland-aesni-hidden" in [f.id for f in s.findings]
    f = next(f for f in s.findings if f.id == "userland-aesni-hidden")
    assert "bsdcrypt userland" in f.remedy and "x86-64-v2-AES" in f.remedy
    assert s.userland_aes.services and s.userland_aes.services[0].openssl == "/usr/bin/openssl"
    assert "AES-NI hidden by the hypervisor" in table(s)


def test_real_cpu_without_aesni_is_never_forced() -> None:
    s = assess(_debian({"aes", "pclmulqdq"}, vm=False, cpuinfo=NEHALEM), "h", "test")
    assert s.userland_aes.case == "cpu-without-aesni"
    f = next(f for f in s.findings if f.id == "userland-cpu-no-aesni")
    assert "Never set OPENSSL_ia32cap" in f.remedy


def test_libressl_says_the_variable_is_ignored() -> None:
    s = assess(_debian({"aes", "pclmulqdq"}, libressl=True), "h", "test")
    f = next(f for f in s.findings if f.id == "userland-aesni-hidden")
    assert "ignore OPENSSL_ia32cap" in f.message
    assert s.userland_aes.libraries and s.userland_aes.libraries[0].honours_ia32cap is False


def test_aes_visible_has_no_userland_finding() -> None:
    assert not [i for i in ids(_debian(set())) if i.startswith("userland")]


@pytest.mark.parametrize(
    "line, finding, severity",
    [
        ("/etc/systemd/system/tor@default.service.d/bsdcrypt-aesni.conf:2:Environment=OPENSSL_ia32cap=0x82982203478bfffd:0x0",
         "userland-override", "info"),
        ("/etc/environment:1:OPENSSL_ia32cap=0x82982203478bfffd:0x0", "userland-override-global", "warning"),
        ("/etc/rc.conf:9:tor_env=\"OPENSSL_ia32cap=+0x200000200000000\"", "userland-override-plus", "warning"),
        ("/etc/rc.conf:9:tor_env=\"OPENSSL_ia32cap=0xfffa3203078bffff:0x405fc6f1bf07ab\"", "userland-override-stale",
         "warning"),
    ],
)
def test_overrides_are_checked_against_the_current_vector(line: str, finding: str, severity: str) -> None:
    s = assess(_debian({"aes", "pclmulqdq"}, cpuinfo=NEHALEM, overrides=line + "\n"), "h", "test")
    f = next(f for f in s.findings if f.id == finding)
    assert f.severity == severity


def test_forced_override_on_a_cpu_without_aesni_is_critical() -> None:
    line = "/etc/rc.conf:9:tor_env=\"OPENSSL_ia32cap=0x82982203478bfffd:0x0\"\n"
    s = assess(_debian({"aes", "pclmulqdq"}, vm=False, cpuinfo=NEHALEM, overrides=line), "h", "test")
    assert "userland-override-sigill" in [f.id for f in s.findings]
    assert s.verdict == "critical"
    assert nagios(s).startswith("BSDCRYPT CRITICAL: OPENSSL_ia32cap at /etc/rc.conf:9 (tor)")


def test_commented_lines_do_not_count() -> None:
    line = "/etc/rc.conf:9:#tor_env=\"OPENSSL_ia32cap=+0x200000200000000\"\n"
    assert not [i for i in ids(_debian(set(), overrides=line)) if i.startswith("userland-override")]


def test_absent_steps_are_unknown() -> None:
    _, ev = load(ROOT / "fixtures" / "hosts" / "linux-debian12-local.yaml")
    s = assess(ev, "h", "test")
    assert s.userland_aes.libraries is None and s.userland_aes.overrides is None
    assert "Userland" not in table(s)


def test_hostile_override_lines_bring_no_control_characters() -> None:
    line = "/etc/rc.conf.d/t\x1b[2Jor:3:tor_env=\"OPENSSL_ia32cap=\x1b[31m0x1\"\n"
    s = assess(_debian({"aes", "pclmulqdq"}, cpuinfo=NEHALEM, overrides=line), "h", "test")
    (o,) = s.userland_aes.overrides or []
    assert o.hazard == "unreadable" and o.value is None and "\x1b" not in o.file
    assert "\x1b" not in table(s) and "\x1b" not in nagios(s)


def test_the_real_recording_with_the_userland_steps() -> None:
    _, ev = load(ROOT / "fixtures" / "hosts" / "linux-debian12-epyc-openssl3-userland.yaml")
    u = assess(ev, "h", "test").userland_aes
    assert u.case == "aesni-visible" and u.overrides == []
    assert [(lib.path, lib.version, lib.grammar, lib.aesni) for lib in u.libraries or []] == [
        ("/usr/bin/openssl", "3.0.19", "two-word", True)]
    assert [(s.binary, s.openssl) for s in u.services or []] == [("/usr/sbin/sshd", "/usr/bin/openssl")]
