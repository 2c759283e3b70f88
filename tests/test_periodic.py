"""docs/periodic/450.bsdcrypt: valid sh, and the periodic(8) contract (knobs, quiet when all is
well, exit 0/1/2/3) when run by a POSIX sh against recordings.

FreeBSD's /etc/defaults/periodic.conf and security.functions are not on this machine: the test
runs a copy of the script whose two `.` lines point at small stand-ins providing what it uses
(source_periodic_confs, check_yesno_period with its _period check).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "periodic" / "450.bsdcrypt"

DEFAULTS = r"""
source_periodic_confs() { :; }
check_yesno_period() {
	eval "_v=\${$1}"
	eval "_p=\${${1%_enable}_period}"
	case "$_v" in [Yy][Ee][Ss]) ;; *) return 1 ;; esac
	[ "$_p" = "${PERIODIC_NOW:-daily}" ]
}
"""

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def test_script_is_valid_posix_sh() -> None:
    for sh in ("sh", "dash", "bash"):
        if shutil.which(sh):
            r = subprocess.run([sh, "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
            assert r.returncode == 0, (sh, r.stderr)


def test_script_follows_the_base_system_conventions() -> None:
    text = SCRIPT.read_text()
    assert text.startswith("#!/bin/sh -\n")
    assert ". /etc/defaults/periodic.conf\n    source_periodic_confs\n" in text
    assert ". /etc/periodic/security/security.functions\n" in text
    assert "if check_yesno_period security_status_bsdcrypt_enable\n" in text
    assert text.rstrip().endswith('exit "$rc"')
    assert os.access(SCRIPT, os.X_OK)


@pytest.fixture()
def runner(tmp_path: Path) -> Runner:
    (tmp_path / "periodic.conf").write_text(DEFAULTS)
    (tmp_path / "security.functions").write_text("# stand-in\n")
    copy = tmp_path / "450.bsdcrypt"
    copy.write_text(
        SCRIPT.read_text()
        .replace("/etc/defaults/periodic.conf", str(tmp_path / "periodic.conf"))
        .replace("/etc/periodic/security/security.functions", str(tmp_path / "security.functions"))
    )
    prog = tmp_path / "bsdcrypt"
    prog.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'from bsdcrypt.cli import main; main()' \"$@\"\n")
    prog.chmod(0o755)
    sh = shutil.which("dash") or "sh"

    def run(recording: str | None, **knobs: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "security_status_bsdcrypt_program": str(prog), **knobs}
        if recording:
            env["security_status_bsdcrypt_flags"] = f"--host replay:{recording}"
        return subprocess.run([sh, str(copy)], capture_output=True, text=True, env=env, timeout=120, check=False)

    return run


@pytest.mark.slow
def test_quiet_when_all_is_well(runner: Runner) -> None:
    r = runner("freebsd-13.0-hyperv-builtin")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


@pytest.mark.parametrize("name", ["freebsd-12.2-bhyve-not-loaded-overridden",
                                  "freebsd-12.2-bhyve-geli-software-aesni-kldloaded"])
def test_findings_are_reported_with_rc_1(runner: Runner, name: str) -> None:
    r = runner(name)
    assert r.returncode == 1
    assert r.stdout.startswith("\nChecking kernel AES acceleration (bsdcrypt):\n")
    assert "Verdict" in r.stdout and "->" in r.stdout  # the table with a remedy per finding


def test_unassessable_host_is_rc_3(runner: Runner) -> None:
    r = runner("linux-debian12-local")
    assert r.returncode == 3 and "could not assess" in r.stdout


def test_knobs(runner: Runner, tmp_path: Path) -> None:
    bad = "freebsd-12.2-bhyve-not-loaded-overridden"
    assert runner(bad, security_status_bsdcrypt_enable="NO").stdout == ""
    assert runner(bad, security_status_bsdcrypt_enable="NO").returncode == 0
    assert runner(bad, security_status_bsdcrypt_period="weekly").returncode == 0  # not this period
    assert runner(bad, security_status_bsdcrypt_period="weekly", PERIODIC_NOW="weekly").returncode == 1
    missing = runner(bad, security_status_bsdcrypt_program=str(tmp_path / "nope"))
    assert missing.returncode == 2 and "not installed" in missing.stdout


@pytest.mark.slow
def test_userland_check_warns_on_a_stale_override(runner: Runner, tmp_path: Path) -> None:
    if not shutil.which("openssl"):
        pytest.skip("needs openssl")
    jail = tmp_path / "jail"
    (jail / "etc").mkdir(parents=True)
    # qemu Nehalem's forced vector (fixtures/parsers/openssl_version), not this machine's: stale here
    (jail / "etc" / "rc.conf").write_text('tor_env="OPENSSL_ia32cap=0x82982203478bfffd:0x0"\n')
    flags = f"--root {jail} --init rc --openssl {shutil.which('openssl')}"
    good = "freebsd-13.0-hyperv-builtin"
    r = runner(good, security_status_bsdcrypt_userland_services="tor", security_status_bsdcrypt_userland_flags=flags)
    assert r.returncode == 1, r.stdout
    assert "Checking OPENSSL_ia32cap of tor" in r.stdout and "stale" in r.stdout
    assert (jail / "etc" / "rc.conf").read_text().startswith("tor_env=")  # only warned
    r = runner(good, security_status_bsdcrypt_userland_services="tor", security_status_bsdcrypt_userland_flags=flags,
               security_status_bsdcrypt_userland_remove="YES")
    assert r.returncode == 1 and (jail / "etc" / "rc.conf").read_text() == ""
    r = runner(good, security_status_bsdcrypt_userland_services="tor", security_status_bsdcrypt_userland_flags=flags)
    assert (r.returncode, r.stdout) == (0, "")  # nothing left to check: quiet
