"""The one loop that drives every ssh child (bsdcrypt/ssh/driver.py), with plain /bin/sh children
standing in for ssh, and OpenSSHHost through it with a stand-in `ssh` program: the output of each
child kept apart, the script fed whole however long, the deadline, the output cap and abort killing
the child's whole process group, a child whose pipes outlive it, the slow-host note.

No test depends on timing luck: deadlines that must not pass are minutes away, and the waits that
must end do so because the loop ended them, bounded by generous limits."""

from __future__ import annotations

import gc
import hashlib
import os
import stat
import subprocess
import threading
import time
import weakref
from pathlib import Path

import pytest

from bsdcrypt.ssh import SSHError
from bsdcrypt.ssh.driver import ABORTED, OVERFLOW, TIMEOUT, Conversation, Driver, driver
from bsdcrypt.ssh.openssh import OpenSSHContext, OpenSSHHost

FAR = 600.0  # a deadline no test may reach
WAIT = 60.0  # how long a test waits for what the loop must do


# The process's loop (epoll and pidfd on Linux), and one as on systems without them (poll(2), a look
# at each child every TICK): every behaviour below holds for both.
_PLAIN: list[Driver] = []


@pytest.fixture(params=["native", "plain"])
def loop(request: pytest.FixtureRequest) -> Driver:
    if request.param == "native":
        return driver()
    if not _PLAIN:
        _PLAIN.append(Driver(epoll=False, pidfd=False))
    return _PLAIN[0]


def _child(loop: Driver, script: str, data: bytes = b"", deadline: float = FAR, max_output: int = 1 << 24,
           slow_after: float | None = None, on_slow: object = None) -> Conversation:
    proc = subprocess.Popen(["/bin/sh", "-c", script], bufsize=0, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    conv = Conversation(proc, data, time.monotonic() + deadline, max_output, slow_after,
                        on_slow)  # type: ignore[arg-type]
    loop.drive(conv)
    return conv


def _end(conv: Conversation) -> None:
    assert conv.done.wait(WAIT), "the loop never ended the conversation"
    conv.proc.wait(WAIT)  # the child ended by itself, or was killed: never left running


def _gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _wait_gone(pid: int) -> bool:
    for _ in range(600):  # a SIGKILL takes effect at once; the loop only allows for a loaded machine
        if _gone(pid):
            return True
        time.sleep(0.1)
    return False


def test_each_child_gets_its_own_output_and_exit_status(loop: Driver) -> None:
    convs = [_child(loop, f"head -c {70000 + i} /dev/zero | tr '\\0' {'ab'[i % 2]}; echo err{i} >&2; exit {i}")
             for i in range(12)]
    for i, conv in enumerate(convs):
        _end(conv)
        assert conv.outcome is None
        assert bytes(conv.out) == ("ab"[i % 2] * (70000 + i)).encode()
        assert bytes(conv.err) == f"err{i}\n".encode()
        assert conv.proc.returncode == i


def test_a_script_longer_than_a_pipe_holds_is_fed_whole(loop: Driver) -> None:
    data = b"".join(b"line %06d\n" % i for i in range(60000))  # 720 kB: ten times what a pipe holds
    conv = _child(loop, "sha256sum", data)
    _end(conv)
    assert conv.outcome is None
    assert bytes(conv.out).split()[0].decode() == hashlib.sha256(data).hexdigest()


def test_the_deadline_kills_the_whole_process_group(loop: Driver) -> None:
    conv = _child(loop, "sleep 600 & echo $!; wait", deadline=1.0)
    _end(conv)
    assert conv.outcome == TIMEOUT
    grandchild = int(bytes(conv.out).split()[0])
    assert _wait_gone(grandchild), "the child's background process outlived the deadline"


def test_the_output_cap_ends_the_conversation_and_kills_the_child(loop: Driver) -> None:
    conv = _child(loop, "echo $$; exec cat /dev/zero", max_output=1 << 16)
    _end(conv)
    assert conv.outcome == OVERFLOW
    assert len(conv.out) + len(conv.err) <= (1 << 16) + (1 << 16)  # at most one read past the cap
    assert _wait_gone(conv.proc.pid)


def test_abort_from_another_thread_ends_it_now(loop: Driver) -> None:
    conv = _child(loop, "sleep 600 & echo $!; wait")
    threading.Timer(0.2, conv.abort).start()
    _end(conv)
    assert conv.outcome == ABORTED
    assert _wait_gone(int(bytes(conv.out).split()[0]))


def test_a_child_whose_pipes_outlive_it_is_done_after_a_grace(loop: Driver) -> None:
    """As a ControlPersist master would: something the child started keeps its stdout open."""
    conv = _child(loop, "setsid sleep 600 & echo started $!; exit 7")
    try:
        _end(conv)
        assert conv.outcome is None and conv.proc.returncode == 7
        assert bytes(conv.out).startswith(b"started ")
    finally:
        pid = int(bytes(conv.out).split()[1])
        os.kill(pid, 9)


def test_the_slow_note_is_told_once_while_nothing_was_printed(loop: Driver) -> None:
    notes: list[str] = []
    conv = _child(loop, "sleep 600", slow_after=0.05, on_slow=lambda: notes.append("slow"))
    for _ in range(600):
        if notes:
            break
        time.sleep(0.1)
    conv.abort()
    _end(conv)
    assert notes == ["slow"]


def _fake_ssh(tmp_path: Path, body: str) -> str:
    """A stand-in for the ssh client: ignores its arguments, reads the script, does `body`."""
    path = tmp_path / "ssh"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _host(tmp_path: Path, body: str, timeout: float = FAR, max_output: int | None = None) -> OpenSSHHost:
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    UserKnownHostsFile /dev/null\n")
    ctx = OpenSSHContext(str(cfg), ssh=_fake_ssh(tmp_path, body))
    return OpenSSHHost.from_spec("root@127.0.0.1", ctx, timeout=timeout, max_output=max_output)


def test_openssh_host_reads_through_the_loop(tmp_path: Path) -> None:
    host = _host(tmp_path, "cat; echo to-stderr >&2; exit 3")
    result = host.run("echo hello")
    assert (result.rc, result.stdout, result.stderr) == (3, b"echo hello", b"to-stderr\n")


def test_openssh_host_deadline_is_a_timeout_row_and_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    host = _host(tmp_path, f"sleep 600 & echo $! > {pidfile}; wait", timeout=1.0)
    with pytest.raises(SSHError) as caught:
        host.run("true")
    assert caught.value.kind == "timeout" and "no output yet" in str(caught.value)
    assert _wait_gone(int(pidfile.read_text()))


def test_openssh_host_output_cap_is_a_garbage_row(tmp_path: Path) -> None:
    host = _host(tmp_path, "exec cat /dev/zero", max_output=1 << 20)
    with pytest.raises(SSHError) as caught:
        host.run("true")
    assert caught.value.kind == "garbage" and "1 MiB" in str(caught.value)


def test_openssh_host_abort_is_a_timeout_row(tmp_path: Path) -> None:
    host = _host(tmp_path, "sleep 600 & wait")
    threading.Timer(0.3, host.abort).start()
    with pytest.raises(SSHError) as caught:
        host.run("true")
    assert caught.value.kind == "timeout"


def test_openssh_host_maps_exit_255_and_stderr_to_a_row(tmp_path: Path) -> None:
    host = _host(tmp_path, "echo 'ssh: connect to host 127.0.0.1 port 22: Connection refused' >&2; exit 255")
    with pytest.raises(SSHError) as caught:
        host.run("true")
    assert caught.value.kind == "refused"


def test_ended_conversations_are_not_kept_until_their_deadline(loop: Driver) -> None:
    """The loop's deadline timers of ended conversations (minutes away) must not keep each one's output
    alive: at most a few of many are still held when they have all ended."""
    refs = []
    for _ in range(60):
        conv = _child(loop, "head -c 100000 /dev/zero")
        _end(conv)
        refs.append(weakref.ref(conv))
        del conv
    gc.collect()
    assert sum(r() is not None for r in refs) <= 20
