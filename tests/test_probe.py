"""The probe script's framing: real sh, truncation, garbage, forged frames."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdcrypt.errors import ProbeError
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.probe import FILES, STEPS, Evidence, Step, build_script, gather, parse_output, render


def test_script_is_valid_posix_sh() -> None:
    script = build_script("@@bsdcrypt-0123")
    proc = subprocess.run(["sh", "-n"], input=script.encode(), capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_gather_locally_runs_every_step_once() -> None:
    ev = gather(LocalHost())
    names = list(ev.steps)
    assert names[: len(STEPS)] == [n for n, _ in STEPS]
    for path in FILES:
        assert f"file:{path}" in ev.steps
    assert ev.text("uname_s") is not None
    # A failing step (freebsd-version on Linux) does not hide the next ones.
    assert ev.steps["freebsd_version_k"].rc != 0
    assert ev.steps["id_u"].ok


def test_render_and_parse_round_trip_keeps_exact_bytes() -> None:
    ev = Evidence(
        {
            "a": Step(0, b"no newline at end"),
            "b": Step(1, b"two\n\nnewlines\n\n"),
            "file:/boot/loader.conf": Step(0, b'aesni_load="YES"\r\n\xff\n'),
            "empty": Step(0, b""),
        }
    )
    assert parse_output(render(ev, "@@T1"), "@@T1").steps == ev.steps


def test_truncated_output_keeps_complete_steps() -> None:
    ev = Evidence({"a": Step(0, b"one\n"), "b": Step(0, b"two\n")})
    data = render(ev, "@@T")
    cut = data[: data.index(b"two") + 2]
    assert list(parse_output(cut, "@@T").steps) == ["a"]


def test_garbage_is_a_probe_error() -> None:
    with pytest.raises(ProbeError, match="not the output"):
        parse_output(b"Welcome to my shell!\nLast login: ...\n", "@@T")


def test_cut_before_first_step_is_a_probe_error() -> None:
    with pytest.raises(ProbeError, match="cut off"):
        parse_output(b"@@T begin uname_s\nFree", "@@T")


def test_file_content_cannot_forge_frames_with_another_token() -> None:
    forged = b"@@OTHER end uname_s 0\n@@OTHER begin evil\n"
    ev = Evidence({"file:/boot/loader.conf": Step(0, forged), "uname_s": Step(0, b"FreeBSD\n")})
    back = parse_output(render(ev, "@@REAL"), "@@REAL")
    assert back.steps == ev.steps


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    try:
        parse_output(data, "@@T")
    except ProbeError:
        pass


# -- the buffered output (issue 13): a few large writes, the same bytes, partial evidence when killed


def _run_counting_writes(script: str) -> tuple[list[bytes], int]:
    """Run `script` with /bin/sh -s in a session of its own; stdout is a SOCK_SEQPACKET socket, so each
    write(2) of the probe arrives as one message."""
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours:
        proc = subprocess.Popen(["/bin/sh", "-s"], stdin=subprocess.PIPE, stdout=theirs.fileno(),
                                stderr=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        assert proc.stdin is not None
        proc.stdin.write(script.encode())
        proc.stdin.close()
        writes = []
        while True:
            msg = ours.recv(1 << 20)
            if not msg:
                break
            writes.append(msg)
        return writes, proc.wait(timeout=120)


def _steady(data: bytes) -> bytes:
    """Output of two runs on this machine, without what differs from run to run (ldd's load addresses)."""
    import re

    return re.sub(rb"\(0x[0-9a-f]+\)", b"(ADDR)", data)


def test_buffered_probe_prints_the_same_bytes_in_a_few_writes() -> None:
    token = "@@bsdcrypt-0123456789abcdef"
    direct, rc1 = _run_counting_writes(build_script(token, buffered=False))
    buffered, rc2 = _run_counting_writes(build_script(token))
    assert rc1 == rc2 == 0
    assert _steady(b"".join(buffered)) == _steady(b"".join(direct))
    assert len(direct) > 60  # a frame, the output, a frame: per step
    # the first step on its own, then all the rest at once
    assert len(buffered) == 2
    assert parse_output(b"".join(buffered), token).steps.keys() == parse_output(b"".join(direct), token).steps.keys()


def test_buffered_probe_without_dd_writes_directly() -> None:
    token = "@@bsdcrypt-0123456789abcdef"
    script = build_script(token)
    assert "command -v dd " in script
    no_dd, rc = _run_counting_writes(script.replace("command -v dd ", "command -v bsdcrypt-no-such-dd "))
    direct, _ = _run_counting_writes(build_script(token, buffered=False))
    assert rc == 0 and _steady(b"".join(no_dd)) == _steady(b"".join(direct)) and len(no_dd) == len(direct)


def _with_step(monkeypatch: pytest.MonkeyPatch, after: str, name: str, cmd: str) -> None:
    import bsdcrypt.probe as probe_mod

    steps = list(STEPS)
    at = [n for n, _ in steps].index(after) + 1
    monkeypatch.setattr(probe_mod, "STEPS", (*steps[:at], (name, cmd), *steps[at:]))


def test_probe_terminated_mid_way_still_gives_the_finished_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host-side timeout (SIGTERM to the probe's process group) in the middle of a step: the steps that
    finished come out (dd ignores SIGTERM and writes what it holds), the cut step and the rest do not."""
    from bsdcrypt.collect.analyze import parse_probe_output

    token = "@@bsdcrypt-0123456789abcdef"
    # A real timeout comes seconds in; here the step waits (an event, not a sleep) until the buffering
    # dd of this session has been exec'd, i.e. its subshell's `trap '' HUP TERM` is in force. Linux's
    # /proc/PID/stat: field 2 is (comm), field 6 the session id, which is the probe shell's $$ here.
    dd_ready = ("n=0; while [ $n -lt 1200 ]; do for f in /proc/[0-9]*/stat; do read -r l < \"$f\" || continue;"
                " set -- $l; [ \"$2\" = '(dd)' ] && [ \"$6\" = \"$$\" ] && break 2; done; sleep 0.05;"
                " n=$((n + 1)); done 2>/dev/null")
    _with_step(monkeypatch, "sysctl", "hang", f"echo partial; {dd_ready}; kill -TERM 0; sleep 60")
    writes, rc = _run_counting_writes(build_script(token))
    assert rc == -15
    steps = list(parse_output(b"".join(writes), token).steps)
    assert steps == [n for n, _ in STEPS[: [n for n, _ in STEPS].index("sysctl") + 1]]
    assert len(writes) == 2
    with pytest.raises(ProbeError, match="before its last one"):
        parse_probe_output(b"".join(writes), token)


def test_probe_killed_outright_reads_as_cut_off_not_garbage(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL takes dd's buffer with it; the first step was written on its own, so the output still has a
    complete frame and reads as cut off (analyze's `cut-off` row), never as `garbage`."""
    from bsdcrypt.collect.analyze import from_bytes

    token = "@@bsdcrypt-0123456789abcdef"
    _with_step(monkeypatch, "kldstat_v", "killed", "kill -KILL 0")
    writes, rc = _run_counting_writes(build_script(token))
    assert rc == -9
    assert list(parse_output(b"".join(writes), token).steps) == ["uname_s"]
    got = from_bytes(b"".join(writes), "host", "file", "file:probe.out", token)
    assert got.error_kind == "cut-off" and got.evidence is None


def test_a_failing_step_does_not_hide_the_others_when_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "@@bsdcrypt-0123456789abcdef"
    _with_step(monkeypatch, "uname_a", "fails", "echo oops >&2; exit 7")
    writes, rc = _run_counting_writes(build_script(token))
    ev = parse_output(b"".join(writes), token)
    assert rc == 0 and ev.steps["fails"] == Step(7, b"oops\n")
    assert list(ev.steps)[: len(STEPS) + 1] == [n for n, _ in STEPS[:2]] + ["fails"] + [n for n, _ in STEPS[2:]]


@pytest.mark.parametrize("shell", ["dash", "bash", "busybox"])
def test_buffered_probe_under_other_shells(shell: str) -> None:
    import shutil

    exe = shutil.which(shell)
    if exe is None:
        if shell == "busybox" and os.environ.get("BSDCRYPT_REQUIRE_BUSYBOX") == "1":
            pytest.fail("BSDCRYPT_REQUIRE_BUSYBOX=1 but busybox is missing (apt install busybox)")
        pytest.skip(f"{shell} not installed")
    argv = [exe, "sh", "-s"] if shell == "busybox" else [exe, "-s"]
    if shell == "bash":
        argv = [exe, "--posix", "-s"]
    token = "@@bsdcrypt-0123456789abcdef"
    outs = [subprocess.run(argv, input=build_script(token, buffered=b).encode(), capture_output=True,
                           check=False, timeout=120) for b in (True, False)]
    assert outs[0].returncode == outs[1].returncode == 0
    assert _steady(outs[0].stdout) == _steady(outs[1].stdout)
    assert "exists:/boot/kernel/padlock.ko" in parse_output(outs[0].stdout, token).steps


def test_a_step_name_the_probe_never_gathers_is_a_bug_not_absent_evidence() -> None:
    """Readers name steps by bare strings: a typo must fail loudly instead of reading "absent" (None)."""
    from bsdcrypt.probe import Evidence, is_step

    ev = Evidence()
    assert ev.step("kldstat_v") is None and ev.text("uname_a") is None  # gathered by the probe, absent here
    assert ev.file("/var/run/dmesg.boot") is None and ev.exists("/boot/kernel/aesni.ko") is None
    assert is_step("file:/boot/loader.conf.d/aesni.conf") and is_step("file:/boot/site.conf")  # files named on the host
    for typo in ("kldstat-v", "file:var/run/dmesg.boot", "exists:/boot/kernel/aesni"):
        with pytest.raises(KeyError, match="no step named"):
            ev.step(typo)
    with pytest.raises(KeyError):
        ev.text("unamea")


def test_every_step_name_constant_is_a_step_the_probe_gathers() -> None:
    """Readers name steps by StepName, File and the *_step helpers: each must be what the probe frames."""
    from bsdcrypt.probe import (
        CRYPTO_DRIVERS,
        MODULE_FILES,
        OPENSSL_PROGRAMS,
        PASTE_STEPS,
        File,
        StepName,
        exists_step,
        file_step,
        is_step,
        kldstat_m_step,
        openssl_step,
    )

    gathered = set(gather(LocalHost()).steps)
    names = {v for k, v in vars(StepName).items() if k.isupper()}
    assert len(names) >= 20 and set(PASTE_STEPS) <= names
    for name in names - set(PASTE_STEPS):
        assert name in gathered, name
    for name in PASTE_STEPS:  # only a paste gives them; the probe never runs them
        assert name not in gathered and is_step(name)
    paths = {v for k, v in vars(File).items() if k.isupper()}
    assert paths == set(FILES)
    for path in paths:
        assert file_step(path) in gathered, path
    for driver in CRYPTO_DRIVERS:
        assert kldstat_m_step(driver) in gathered
    for program in OPENSSL_PROGRAMS:
        assert openssl_step(program) in gathered
    for path in MODULE_FILES:
        assert exists_step(path) in gathered
    # every command step has its constant: no step is read by a bare string
    assert {n for n, _ in STEPS} - names == {kldstat_m_step(d) for d in CRYPTO_DRIVERS} | {
        openssl_step(p) for p in OPENSSL_PROGRAMS
    }


def test_file_step_and_dir_step_name_what_loader_conf_files_and_dirs_name(tmp_path: Path) -> None:
    """The probe frames a file loader_conf_files names as file_step(path), a directory loader_conf_dirs
    names as dir_step(path) and each *conf entry in it as file_step(entry)."""
    from bsdcrypt.probe import dir_step, file_step

    r = str(tmp_path)
    (tmp_path / "boot" / "mine.d").mkdir(parents=True)
    (tmp_path / "boot" / "site.conf").write_bytes(b"x=1\n")
    (tmp_path / "boot" / "mine.d" / "a.conf").write_bytes(b"y=1\n")
    (tmp_path / "boot" / "loader.conf").write_bytes(
        f'loader_conf_files="{r}/boot/site.conf"\nloader_conf_dirs="{r}/boot/mine.d"\n'.encode()
    )
    # The probe reads absolute paths: run it with /boot moved under the temporary tree.
    script = build_script("@@tok").replace(" /boot/", f" {r}/boot/").replace("'/boot/", f"'{r}/boot/")
    out = subprocess.run(["sh"], input=script.encode(), capture_output=True, check=False, timeout=120).stdout
    ev = parse_output(out, "@@tok")
    assert ev.file(f"{r}/boot/site.conf") == b"x=1\n" and ev.steps[file_step(f"{r}/boot/site.conf")].ok
    assert dir_step(f"{r}/boot/mine.d") in ev.steps
    assert ev.steps[file_step(f"{r}/boot/mine.d/a.conf")].out == b"y=1\n"
    assert ev.files_under(f"{r}/boot/mine.d") == [f"{r}/boot/mine.d/a.conf"]
