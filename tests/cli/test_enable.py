"""`bsdcrypt enable` / `disable --persist`: decisions on the shipped recordings, real edits under --root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from freebsd_tree import add_kernel
from typer.testing import CliRunner

from bsdcrypt.cli.enable import register

app = typer.Typer()
register(app)
runner = CliRunner()

# recording -> (exit status of `enable --persist --dry-run`, text in the output)
RECORDINGS = {
    "freebsd-11.0-current-custom-kernel-x-no-aesni": (0, "$ kldload aesni"),
    "freebsd-12.2-bhyve-aesni-flag-hidden": (2, "passthrough"),
    # the probe ran as non-root: a dry run shows what root would do, says so, and exits 0
    "freebsd-12.2-bhyve-geli-software-aesni-kldloaded": (0, "applying this needs root"),
    "freebsd-12.2-bhyve-not-loaded-overridden": (0, '+aesni_load="YES" # bsdcrypt enable: was=NO'),
    "freebsd-13.0-hyperv-builtin": (0, "GENERIC includes aesni since FreeBSD 13.0"),
    "freebsd-14.0-current-ryzen-v1202b-builtin": (0, "compiled into the running kernel"),
    "freenas-11.3-xeon-x3430-no-aesni-old-msg": (2, "no AES instructions"),
    "hardenedbsd-13.0-stable-epyc-builtin": (0, "HardenedBSD"),
    "linux-debian12-local": (2, "not a FreeBSD-family host"),
    "opnsense-20.7-hbsd12.1-i5-6200u-loaded": (0, "Cryptography settings"),
    "opnsense-22.1-celeron-j4125-sha-only-builtin": (2, "SHA only"),
    "pfsense-2.4.5-celeron-j3160-not-loaded": (2, "Cryptographic & Thermal Hardware"),
    "truenas-12.2-xeon-x3430-no-aes-builtin": (2, "no AES instructions"),
}


@pytest.mark.parametrize(("name", "expected"), sorted(RECORDINGS.items()))
def test_enable_dry_run_on_recordings(name: str, expected: tuple[int, str]) -> None:
    code, text = expected
    result = runner.invoke(app, ["enable", "--persist", "--dry-run", "--host", f"replay:{name}"])
    assert result.exit_code == code, result.output
    assert text in result.output


def test_json_format() -> None:
    result = runner.invoke(
        app,
        [
            "enable",
            "--persist",
            "-n",
            "-f",
            "json",
            "-H",
            "replay:freebsd-11.0-current-custom-kernel-x-no-aesni",
        ],
    )
    data = json.loads(result.output.split("\ndry run")[0])
    assert [a["action"] for a in data["plan"]] == ["run", "run", "write"]
    assert data["plan"][2]["diff"].startswith("--- /boot/loader.conf")


def _boot(tmp_path: Path, data: bytes) -> Path:
    (tmp_path / "boot").mkdir()
    add_kernel(tmp_path)  # a FreeBSD system's kernel: --root refuses a tree without a FreeBSD kernel or userland
    conf = tmp_path / "boot" / "loader.conf"
    conf.write_bytes(data)
    return conf


@pytest.mark.slow
def test_enable_disable_under_root_for_real(tmp_path: Path) -> None:
    original = b'zfs_load="YES"\r\naesni_load="NO"  # off\r\nkern.vty=vt'
    conf = _boot(tmp_path, original)
    args = ["--persist", "--root", str(tmp_path), "--yes"]
    first = runner.invoke(app, ["enable", *args])
    assert first.exit_code == 0, first.output
    assert 'aesni_load="YES" is in effect' in first.output
    assert (
        conf.read_bytes()
        == b'zfs_load="YES"\r\naesni_load="YES"  # off # bsdcrypt enable: was=NO\r\nkern.vty=vt'
    )
    second = runner.invoke(app, ["enable", *args])
    assert second.exit_code == 0 and "nothing to change" in second.output
    undo = runner.invoke(app, ["disable", *args])
    assert undo.exit_code == 0, undo.output
    assert conf.read_bytes() == original
    again = runner.invoke(app, ["disable", *args])
    assert "nothing to undo" in again.output


def test_no_confirmation_without_tty_changes_nothing(tmp_path: Path) -> None:
    conf = _boot(tmp_path, b"a=1\n")
    result = runner.invoke(app, ["enable", "--persist", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "--yes" in result.output
    assert conf.read_bytes() == b"a=1\n"


def test_dry_run_under_root_changes_nothing(tmp_path: Path) -> None:
    conf = _boot(tmp_path, b"a=1")
    result = runner.invoke(app, ["enable", "--persist", "--root", str(tmp_path), "--dry-run"])
    assert result.exit_code == 0 and "\\ No newline at end of file" in result.output
    assert conf.read_bytes() == b"a=1"


@pytest.mark.slow
def test_disable_without_persist_undoes_the_boot_time_change(tmp_path: Path) -> None:
    """Issue 28: --persist is optional; disable with or without it undoes enable's loader.conf change
    and never unloads the driver (docs/enable.md)."""
    original = b'aesni_load="NO"\n'
    conf = _boot(tmp_path, original)
    assert runner.invoke(app, ["enable", "--persist", "--root", str(tmp_path), "--yes"]).exit_code == 0
    assert conf.read_bytes() != original
    plan = runner.invoke(app, ["disable", "--root", str(tmp_path), "--dry-run"])
    assert plan.exit_code == 0, plan.output
    # a tree under --root is not the running system: nothing about unloading from this kernel
    assert "kldunload" not in plan.output and "Nothing here touches a running kernel" in plan.output
    undo = runner.invoke(app, ["disable", "--root", str(tmp_path), "--yes"])
    assert undo.exit_code == 0, undo.output
    assert conf.read_bytes() == original
    again = runner.invoke(app, ["disable", "--persist", "--root", str(tmp_path), "--yes"])
    assert again.exit_code == 0 and "nothing to undo" in again.output


def test_disable_with_a_damaged_marker_refuses_without_a_traceback(tmp_path: Path) -> None:
    data = b'aesni_load="YES" # bsdcrypt enable: was=%ZZ\n'
    conf = _boot(tmp_path, data)
    for extra in (["--dry-run"], ["--yes"]):
        result = runner.invoke(app, ["disable", "--persist", "--root", str(tmp_path), *extra])
        assert result.exit_code == 2, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "marker `was=%ZZ` is damaged" in result.output
    assert conf.read_bytes() == data


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize("command", ["enable", "disable"])
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "nonexist", "no such directory"),
        (lambda d: (d / "file").write_bytes(b"") or d / "file", "not a directory"),
        (lambda d: d, "no boot/ directory there"),
    ],
    ids=["missing", "file", "no-boot"],
)
def test_a_bad_root_is_one_line_up_front(
    tmp_path: Path, make: object, message: str, command: str, dry_run: bool
) -> None:
    root = make(tmp_path)  # type: ignore[operator]
    args = [command, "--persist", "--root", str(root), "--dry-run" if dry_run else "--yes"]
    result = runner.invoke(app, args)
    assert result.exit_code == 3, result.output
    assert result.output == f"bsdcrypt: --root {root}: {message}" + result.output.split(message, 1)[1]
    assert result.output.count("\n") == 1 and "plan" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == (["file"] if (tmp_path / "file").exists() else [])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["enable", "--persist", "--bench", "--root", "{root}"], "--bench measures the running kernel"),
        (["enable", "--persist", "--force"], "--force only applies with --root"),
        (
            ["enable", "--persist", "--dry-run", "--root", "{root}", "-H", "replay:freebsd-13.0-hyperv-builtin"],
            "replay:freebsd-13.0-hyperv-builtin is a recording",
        ),
        (
            ["disable", "--persist", "--dry-run", "--root", "{root}", "-H", "replay:freebsd-13.0-hyperv-builtin"],
            "replay:freebsd-13.0-hyperv-builtin is a recording",
        ),
    ],
)
def test_usage_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    conf = _boot(tmp_path, b"a=1\n")
    result = runner.invoke(app, [a.replace("{root}", str(tmp_path)) for a in args])
    assert result.exit_code == 3, result.output
    assert result.output.startswith("bsdcrypt: ") and message in result.output
    assert result.output.count("\n") == 1
    assert conf.read_bytes() == b"a=1\n"


@pytest.mark.parametrize(("answer", "code"), [("n\n", 1), ("\n", 1), ("y\n", 0)])
def test_the_confirmation_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, code: int) -> None:
    """Declined: nothing changed, exit 1 (not done, by the user's choice; docs/enable.md)."""
    from types import SimpleNamespace

    conf = _boot(tmp_path, b"a=1\n")
    monkeypatch.setattr("bsdcrypt.cli.enable.sys", SimpleNamespace(stdin=SimpleNamespace(isatty=lambda: True)))
    result = runner.invoke(app, ["enable", "--persist", "--root", str(tmp_path)], input=answer)
    assert result.exit_code == code, result.output
    assert "Apply these changes?" in result.output
    if code:
        assert "nothing changed." in result.output and conf.read_bytes() == b"a=1\n"
        assert sorted(p.name for p in conf.parent.iterdir()) == ["kernel", "loader.conf"]
    else:
        assert conf.read_bytes() == b'a=1\naesni_load="YES" # bsdcrypt enable: added\n'


def test_ctrl_c_during_the_writes_says_what_was_put_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bsdcrypt.enable import act

    conf = _boot(tmp_path, b"a=1\n")

    def interrupted(*_a: object, **_k: object) -> None:
        raise act.ActInterrupted(f"interrupted: put back {conf} as it was: the loader configuration is unchanged")

    monkeypatch.setattr(act, "perform", interrupted)
    result = runner.invoke(app, ["enable", "--persist", "--root", str(tmp_path), "--yes"])
    assert result.exit_code == 130, result.output
    assert result.output.endswith(f"bsdcrypt: interrupted: put back {conf} as it was: the loader configuration is unchanged\n")


@pytest.mark.parametrize("command", ["enable", "disable"])
def test_verbose_does_not_let_root_through_on_a_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """-v wraps every host in a VerboseHost: the recording check must look under it."""
    from bsdcrypt.hosts import verbose

    was = verbose.enabled()
    verbose.enable(True)
    try:
        conf = _boot(tmp_path, b"a=1\n")
        args = [command, "--persist", "--dry-run", "--root", str(tmp_path), "-H", "replay:freebsd-13.0-hyperv-builtin"]
        result = runner.invoke(app, args)
    finally:
        verbose.enable(was)
    assert result.exit_code == 3, result.output
    assert "replay:freebsd-13.0-hyperv-builtin is a recording" in result.output
    assert conf.read_bytes() == b"a=1\n"


@pytest.mark.slow
def test_loader_conf_local_linked_to_loader_conf_round_trips(tmp_path: Path) -> None:
    """QA: disable failed forever ("changed since bsdcrypt read it") writing one file under two names."""
    original = b'zfs_load="YES"\n'
    conf = _boot(tmp_path, original)
    (tmp_path / "boot" / "loader.conf.local").symlink_to("loader.conf")
    args = ["--persist", "--root", str(tmp_path), "--yes"]
    first = runner.invoke(app, ["enable", *args, "--force"])
    assert first.exit_code == 0, first.output
    assert "are one file" in first.output and b"aesni_load" in conf.read_bytes()
    undo = runner.invoke(app, ["disable", *args])
    assert undo.exit_code == 0, undo.output
    assert undo.output.count("  wrote ") == 1 and conf.read_bytes() == original


@pytest.mark.slow
def test_enable_under_root_follows_the_loader_not_name_order(tmp_path: Path) -> None:
    """Issue 15: loader.conf.d read in directory order, a hidden *conf entry, and a file that
    loader_conf_files names inside DIR: every aesni_load the loader may read last becomes YES (and
    only those), the plan says why, and disable puts every byte back."""
    _boot(tmp_path, b'loader_conf_files="/etc/site.conf"\n')
    d = tmp_path / "boot" / "loader.conf.d"
    d.mkdir()
    (d / "a.conf").write_bytes(b'aesni_load="NO"\n')
    (d / "b.conf").write_bytes(b'aesni_load="YES"\n')
    (d / ".local_conf").write_bytes(b'aesni_load="no"\n')
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "site.conf").write_bytes(b'aesni_load="NO"\n')
    before = {p: p.read_bytes() for p in (d / "a.conf", d / "b.conf", d / ".local_conf", tmp_path / "etc" / "site.conf")}
    args = ["--persist", "--root", str(tmp_path), "--yes"]
    first = runner.invoke(app, ["enable", *args])
    assert first.exit_code == 0, first.output
    assert "directory order, not by name" in first.output
    assert (d / "a.conf").read_bytes() == b'aesni_load="YES" # bsdcrypt enable: was=NO\n'
    assert (d / ".local_conf").read_bytes() == b'aesni_load="YES" # bsdcrypt enable: was=no\n'
    # read right after loader.conf, before loader.conf.d, so never last: left as it is
    assert (tmp_path / "etc" / "site.conf").read_bytes() == b'aesni_load="NO"\n'
    assert 'aesni_load="YES" is in effect' in first.output
    undo = runner.invoke(app, ["disable", *args])
    assert undo.exit_code == 0, undo.output
    assert {p: p.read_bytes() for p in before} == before


def test_enable_under_root_refuses_a_blacklisted_driver(tmp_path: Path) -> None:
    data = b'aesni_load="YES"\nmodule_blacklist="${module_blacklist} aesni"\n'
    conf = _boot(tmp_path, data)
    result = runner.invoke(app, ["enable", "--persist", "--root", str(tmp_path), "--yes"])
    assert result.exit_code == 2, result.output
    assert f"module_blacklist at {conf}:2 names aesni" in result.output
    assert conf.read_bytes() == data
