"""`bsdcrypt userland` for real on this machine: the distribution's OpenSSL 3.0 and qemu-user CPU models.

* A CPU that truly lacks AES-NI: `qemu-x86_64 -cpu Nehalem` (TCG raises #UD on AESENC/PCLMULQDQ there):
  the trial must see SIGILL and refuse. A model with AES-NI (Westmere, Haswell-v1) must pass.
* The "VM hides AES" case the way the s2n write-up simulated it: OPENSSL_ia32cap masking AES-NI and
  PCLMULQDQ for the "before" (--simulate-hidden), the forced value echoed by `openssl version -c`.
No timing assertions: the figures are only checked to exist.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from bsdcrypt.cli.userland import register
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.parsers import ia32cap
from bsdcrypt.parsers.openssl_version import parse_cpuinfo
from bsdcrypt.userland import trial

app = typer.Typer()
register(app)
app.command("noop")(lambda: None)  # a second command keeps typer's sub-command parsing
runner = CliRunner()

OPENSSL = shutil.which("openssl")
QEMU = shutil.which("qemu-x86_64")
# In CI (BSDCRYPT_REQUIRE_QEMU=1, .ci/run) these must run: a missing tool is a failure, never a skip.
_REQUIRED = os.environ.get("BSDCRYPT_REQUIRE_QEMU") == "1"
if _REQUIRED and (QEMU is None or OPENSSL is None):
    raise RuntimeError("BSDCRYPT_REQUIRE_QEMU=1 but qemu-x86_64 or openssl is missing (apt install qemu-user openssl)")
need_openssl = pytest.mark.skipif(OPENSSL is None, reason="needs openssl (.ci/run installs it)")
need_qemu = pytest.mark.skipif(QEMU is None or OPENSSL is None, reason="needs qemu-user (.ci/run installs it)")


def wrapper(tmp_path: Path, model: str) -> str:
    """An `openssl` that runs the real one on an emulated CPU model."""
    path = tmp_path / f"openssl-{model.replace(',', '_')}"
    path.write_text(f'#!/bin/sh\nexec {QEMU} -cpu {model} {OPENSSL} "$@"\n')
    path.chmod(0o755)
    return str(path)


def detected(openssl: str) -> tuple[int, ...]:
    res = LocalHost().run(f"unset OPENSSL_ia32cap; {openssl} version -c 2>/dev/null")
    words = parse_cpuinfo(res.stdout.decode())[0]
    assert words is not None
    return words


@pytest.mark.slow
@need_qemu
def test_cpu_without_aesni_is_refused_on_sigill(tmp_path: Path) -> None:
    prog = wrapper(tmp_path, "Nehalem")
    result = runner.invoke(app, ["userland", "--openssl", prog, "--no-bench"])
    assert result.exit_code == 2, result.output
    assert "sigill      AES-NI key schedule" in result.output
    assert "Refused:" in result.output and "ChaCha20-Poly1305" in result.output
    assert not list(tmp_path.glob("*core*")) and not list(Path("/tmp").glob("qemu_openssl*.core"))


@pytest.mark.slow
@need_qemu
def test_pclmulqdq_missing_kills_gcm_only(tmp_path: Path) -> None:
    prog = wrapper(tmp_path, "Westmere-v1,-pclmulqdq")
    words = detected(prog)
    assert ia32cap.has_aesni(words) and not ia32cap.has_pclmulqdq(words)
    value = ia32cap.forced_value(words, ia32cap.Library("two-word", 2, True, ""))
    t = trial.run(LocalHost(), prog, value, which=("aes", "gcm"))
    verdicts = {r.name: r.verdict for r in t.results}
    assert verdicts == {"aes": "pass", "gcm": "sigill"}
    assert not t.passed


@pytest.mark.slow
@need_qemu
def test_haswell_without_aes_dies_and_with_aes_passes(tmp_path: Path) -> None:
    lib = ia32cap.Library("two-word", 2, True, "")
    no_aes = wrapper(tmp_path, "Haswell-v1,-aes")
    t = trial.run(LocalHost(), no_aes, ia32cap.forced_value(detected(no_aes), lib), which=("aes",))
    assert [r.verdict for r in t.results] == ["sigill"]
    with_aes = wrapper(tmp_path, "Haswell-v1")
    t = trial.run(LocalHost(), with_aes, ia32cap.forced_value(detected(with_aes), lib), which=("aes", "gcm"))
    assert t.passed, t.results


@pytest.mark.slow
@need_qemu
def test_a_model_with_aes_passes_the_simulation(tmp_path: Path) -> None:
    prog = wrapper(tmp_path, "Westmere")
    result = runner.invoke(app, ["userland", "--openssl", prog, "--simulate-hidden", "--no-bench", "-f", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["result"] == "proved"
    assert doc["value"] == ia32cap.format_value(detected(prog))  # masked vector + the two bits = its own vector
    assert all(t["verdict"] == "pass" for t in doc["trials"])


@pytest.mark.slow
@need_openssl
def test_real_openssl_forced_value_is_echoed_with_bit_57() -> None:
    result = runner.invoke(app, ["userland", "--openssl", str(OPENSSL), "--simulate-hidden", "--rounds", "1",
                                 "-f", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    words = ia32cap.parse_value(doc["value"])
    assert words is not None and words[0] & ia32cap.AESNI and words[0] & ia32cap.PCLMULQDQ
    masked = ia32cap.parse_value(doc["detected"])
    assert masked is not None and not masked[0] & ia32cap.AESNI
    echo = LocalHost().run(f"OPENSSL_ia32cap={doc['value']} {OPENSSL} version -c").stdout.decode()
    assert f"env:{doc['value']}" in echo and ia32cap.echo_matches(doc["value"], parse_cpuinfo(echo)[0])
    m = doc["measurement"]
    assert [c["cipher"] for c in m["ciphers"]] == ["aes-128-gcm", "aes-128-ctr", "chacha20-poly1305"]
    assert all(c["before_median"] and c["after_median"] for c in m["ciphers"])
    assert isinstance(m["noisy"], bool)


@pytest.mark.slow
@need_openssl
def test_apply_check_remove_under_root(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    rc = etc / "rc.conf"
    rc.write_text('tor_enable="YES"\ntor_env="LANG=C"\n')
    args = ["userland", "--openssl", str(OPENSSL), "--root", str(tmp_path), "--init", "rc"]
    result = runner.invoke(app, [*args, "--simulate-hidden", "--no-bench", "--apply", "--yes"])
    assert result.exit_code == 0, result.output
    text = rc.read_text()
    assert text.startswith('tor_enable="YES"\ntor_env="LANG=C OPENSSL_ia32cap=0x')
    assert list(etc.glob("rc.conf.bsdcrypt-*"))  # the backup
    again = runner.invoke(app, [*args, "--simulate-hidden", "--no-bench", "--apply", "--yes"])
    assert "nothing to change" in again.output and rc.read_text() == text
    check = runner.invoke(app, [*args, "--check"])
    assert check.exit_code == 0 and "still fits this host" in check.output
    removed = runner.invoke(app, [*args, "--remove", "--yes"])
    assert removed.exit_code == 0, removed.output
    assert rc.read_text() == 'tor_enable="YES"\ntor_env="LANG=C"\n'


@pytest.mark.slow
@need_openssl
def test_check_finds_a_stale_value_and_removes_it(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    rc = tmp_path / "etc" / "rc.conf"
    rc.write_text('tor_env="OPENSSL_ia32cap=0x82982203478bfffd:0x0"\n')  # qemu Nehalem's, not this host's
    args = ["userland", "--openssl", str(OPENSSL), "--root", str(tmp_path), "--init", "rc", "--check"]
    warn = runner.invoke(app, args)
    assert warn.exit_code == 1 and "stale" in warn.output, warn.output
    gone = runner.invoke(app, [*args, "--remove", "--yes"])
    assert gone.exit_code == 1 and rc.read_text() == "", gone.output


@pytest.mark.slow
@need_openssl
def test_systemd_dropin_under_root(tmp_path: Path) -> None:
    args = ["userland", "--openssl", str(OPENSSL), "--root", str(tmp_path), "--init", "systemd", "--no-bench"]
    result = runner.invoke(app, [*args, "--simulate-hidden", "--apply", "--yes"])
    assert result.exit_code == 0, result.output
    dropin = tmp_path / "etc/systemd/system/tor@default.service.d/bsdcrypt-aesni.conf"
    assert "[Service]\nEnvironment=OPENSSL_ia32cap=0x" in dropin.read_text()


@pytest.mark.parametrize(
    "argv, code, text",
    [
        (["--host", "replay:linux-debian12-local"], 3, "recording"),
        (["--service", "tor;reboot", "--root", "/nonexistent", "--init", "rc"], 3, "not an rc.d service name"),
        (["--init", "launchd", "--root", "/tmp"], 3, "--init is rc or systemd"),
        (["--apply", "--simulate-hidden"], 3, "never onto this host"),
        (["--rounds", "0"], 3, "--rounds"),
        (["-f", "xml"], 3, "unknown format"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], code: int, text: str) -> None:
    result = runner.invoke(app, ["userland", *argv])
    assert result.exit_code == code, result.output
    assert text in result.output and "Traceback" not in result.output


def test_libressl_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "openssl"
    fake.write_text("#!/bin/sh\necho 'LibreSSL 3.3.6'\n")  # the first line of the real macOS output (fixture)
    fake.chmod(0o755)
    result = runner.invoke(app, ["userland", "--openssl", str(fake), "--no-bench"])
    assert result.exit_code == 2 and "ignores OPENSSL_ia32cap" in result.output


@pytest.mark.slow
@need_openssl
def test_rc_conf_d_directory_wins_like_load_rc_config(tmp_path: Path) -> None:
    d = tmp_path / "etc" / "rc.conf.d" / "tor"
    d.mkdir(parents=True)
    (tmp_path / "etc" / "rc.conf").write_text('tor_env="LANG=C"\n')
    (d / "10-env").write_text('tor_env="TZ=UTC"\n')  # sourced after rc.conf (libexec/rc/rc.subr)
    args = ["userland", "--openssl", str(OPENSSL), "--root", str(tmp_path), "--init", "rc", "--no-bench"]
    result = runner.invoke(app, [*args, "--simulate-hidden", "--apply", "--yes"])
    assert result.exit_code == 0, result.output
    assert (d / "10-env").read_text().startswith('tor_env="TZ=UTC OPENSSL_ia32cap=0x')
    assert (tmp_path / "etc" / "rc.conf").read_text() == 'tor_env="LANG=C"\n'
