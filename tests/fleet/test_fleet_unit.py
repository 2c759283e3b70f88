"""fleet and ssh pieces that need no sshd: deadlines, resolution errors, known_hosts, config, progress."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bsdcrypt.errors import HostError
from bsdcrypt.fleet import Auditor, FleetOptions, Progress, fd_limit_parallel, run_fleet
from bsdcrypt.hostapi import Host, RunResult
from bsdcrypt.hostsfile import parse_hosts

REPO = Path(__file__).resolve().parents[2]
STUCK_S = 300.0  # how long _Stuck hangs at most: a run that waited for it is told apart by far


class _Stuck:
    """A host whose run ignores abort() and never returns (like a hung resolver)."""

    name = spec = "stuck"

    def __init__(self) -> None:
        self.aborted = threading.Event()
        self.released = threading.Event()  # set by the test once the run is over

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        self.released.wait(STUCK_S)
        raise HostError("released")

    def abort(self) -> None:
        self.aborted.set()

    def close(self) -> None:
        pass


class _Slow:
    """Honours abort(): fails as soon as it is aborted, like SSHHost."""

    name = spec = "slow"

    def __init__(self) -> None:
        self.aborted = threading.Event()

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        if self.aborted.wait(60):
            raise HostError("timed out (aborted)")
        raise AssertionError("unreachable")

    def abort(self) -> None:
        self.aborted.set()

    def close(self) -> None:
        pass


@pytest.mark.slow
def test_hard_deadline_bounds_wall_time_even_when_a_host_ignores_abort() -> None:
    hosts: dict[str, Host] = {"stuck.example": _Stuck(), "slow.example": _Slow()}

    class A(Auditor):
        def make_host(self, entry):  # type: ignore[no-untyped-def]
            return hosts[entry.host]

    entries = parse_hosts("stuck.example\nslow.example\n", "h").entries
    opts = FleetOptions(parallel=2, timeout=0.5)
    start = time.monotonic()
    try:
        run = run_fleet(entries, opts, auditor=A(opts))
    finally:
        hosts["stuck.example"].released.set()  # type: ignore[attr-defined]
    elapsed = time.monotonic() - start
    # the stuck host hangs until released after the run (300 s at most): the run ends after about
    # timeout + GRACE instead; a run that waited for the host would take the whole 300 s
    assert elapsed < STUCK_S / 2, elapsed
    by = {r.entry.host: r for r in run.results}
    assert by["stuck.example"].error_kind == "timeout"
    assert by["slow.example"].error_kind == "error" or by["slow.example"].error_kind == "timeout"
    assert hosts["slow.example"].aborted.is_set()  # type: ignore[attr-defined]
    assert run.exit_code == 3


def test_name_resolution_failure_is_a_row(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def no_dns(*args: object, **kwargs: object) -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)  # nothing leaves the machine
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile none\n")
    entries = parse_hosts("root@nosuchhost.invalid\n", "h").entries
    run = run_fleet(entries, FleetOptions(timeout=2, ssh_config=str(cfg)))
    r = run.results[0]
    assert r.error_kind == "resolve"
    assert "cannot resolve nosuchhost.invalid" in (r.error or "")


@pytest.mark.slow
def test_the_ssh_context_is_built_before_any_deadline_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Importing paramiko and parsing the config take time (0.5 s on a loaded machine): that must not
    count against the first hosts' timeout (it made the test above flaky: 'timeout' instead of 'resolve')."""

    def no_dns(*args: object, **kwargs: object) -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile none\n")

    class SlowContext(Auditor):
        def ssh_context(self):  # type: ignore[no-untyped-def]
            if self._ctx is None:
                time.sleep(1.5)  # longer than the hosts' timeout
            return super().ssh_context()

    opts = FleetOptions(timeout=0.5, ssh_config=str(cfg), parallel=2)
    entries = parse_hosts("root@a.invalid\nroot@b.invalid\n", "h").entries
    run = run_fleet(entries, opts, auditor=SlowContext(opts))
    assert [r.error_kind for r in run.results] == ["resolve", "resolve"], [r.error for r in run.results]


@pytest.mark.slow
def test_a_connect_timeout_says_how_long_and_why(tmp_path: Path) -> None:
    """ConnectTimeout shorter than --timeout: the row names it and its seconds. The unanswered connect is
    real: a loopback listener whose backlog is full drops further SYNs (Linux)."""
    listener = socket.socket()
    listener.bind(("127.4.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.4.0.1", port), timeout=5)
    probe = socket.socket()
    probe.settimeout(0.3)
    try:
        probe.connect(("127.4.0.1", port))
        pytest.skip("this kernel accepts past a full backlog: no way to make a connect hang on loopback")
    except TimeoutError:
        pass
    finally:
        probe.close()
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    ConnectTimeout 1\n    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile none\n")
    try:
        run = run_fleet(parse_hosts(f"root@127.4.0.1:{port}\n", "h").entries,
                        FleetOptions(timeout=30, ssh_config=str(cfg)))
    finally:
        filler.close()
        listener.close()
    r = run.results[0]
    assert r.error_kind == "timeout", r.error
    assert "timed out after 1s (ConnectTimeout) during connect" in (r.error or "")


def _blob(seed: bytes) -> tuple[str, bytes]:
    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + hashlib.sha256(seed).digest()
    return base64.b64encode(blob).decode(), blob


def test_known_hosts_plain_hashed_patterns_revoked(tmp_path: Path) -> None:
    from bsdcrypt.ssh import KnownHosts

    b64a, blob_a = _blob(b"a")
    b64b, blob_b = _blob(b"b")
    salt = b"0123456789abcdef0123"
    digest = hmac.digest(salt, b"[10.0.0.9]:2222", "sha1")
    hashed = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
    path = tmp_path / "known_hosts"
    path.write_text(
        "# comment\n"
        f"fw1.example,192.0.2.1 ssh-ed25519 {b64a}\n"
        f"{hashed} ssh-ed25519 {b64b}\n"
        f"*.lab.example,!bad.lab.example ssh-ed25519 {b64a}\n"
        f"@revoked old.example ssh-ed25519 {b64b}\n"
        f"@cert-authority *.example ssh-ed25519 {b64b}\n"
        "garbage line\n"
    )
    kh = KnownHosts()
    kh.load(str(path))
    kh.load(str(path))  # loaded once
    assert [k.blob for k in kh.lookup("FW1.example") if not k.authority] == [blob_a]
    assert [k.blob for k in kh.lookup("[10.0.0.9]:2222") if not k.authority] == [blob_b]
    assert kh.lookup("10.0.0.9") == []
    assert [k.blob for k in kh.lookup("x.lab.example") if not k.authority] == [blob_a]
    assert [k.authority for k in kh.lookup("bad.lab.example")] == [True]  # only the CA's *.example
    assert [k.revoked for k in kh.lookup("old.example") if not k.authority] == [True]
    assert [k.authority for k in kh.lookup("www.example")] == [True]  # a host CA, not a host key
    kh.add(str(path), "[new.example]:2200", "ssh-ed25519", blob_a, hashed=True)
    assert [k.blob for k in kh.lookup("[new.example]:2200")] == [blob_a]
    fresh = KnownHosts()
    fresh.load(str(path))
    assert [k.blob for k in fresh.lookup("[new.example]:2200")] == [blob_a]
    assert "new.example" not in path.read_text()  # written hashed


def test_ssh_config_is_honoured(tmp_path: Path) -> None:
    from bsdcrypt.ssh import SSHContext, SSHError

    cfg = tmp_path / "config"
    cfg.write_text(
        "Host fw\n"
        "    HostName 192.0.2.7\n"
        "    User admin\n"
        "    Port 2200\n"
        "    IdentityFile ~/.ssh/fw_%r\n"
        "    ProxyJump jump@bastion.example:22\n"
        "    ConnectTimeout 7\n"
        "    HostKeyAlias fw-key\n"
        "Host px\n"
        "    ProxyCommand nc %h %p\n"
        "    StrictHostKeyChecking accept-new\n"
        "Host *\n"
        "    UserKnownHostsFile ~/kh1 ~/kh2\n"
    )
    ctx = SSHContext(str(cfg))
    t = ctx.target("fw")
    assert (t.hostname, t.user, t.port, t.connect_timeout) == ("192.0.2.7", "admin", 2200, 7.0)
    assert t.identity_files == (str(Path("~/.ssh/fw_admin").expanduser()),)
    assert t.proxy_jump == "jump@bastion.example:22"
    assert t.known_hosts_name == "fw-key"  # as ssh: the alias without the port
    assert t.user_known_hosts == (str(Path("~/kh1").expanduser()), str(Path("~/kh2").expanduser()))
    assert t.accept_new is False
    override = ctx.target("fw", user="root", port=22)
    assert (override.user, override.port) == ("root", 22)
    px = ctx.target("px")
    assert px.proxy_command == "nc px 22" and px.accept_new is True
    assert ctx.target("px", port=2222).proxy_command == "nc px 2222"
    with pytest.raises(SSHError, match="no ssh config file"):
        SSHContext(str(tmp_path / "missing"))


def test_progress_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    p = Progress(4, tty)
    p.update(1, 0, force=True)
    p.update(4, 1, force=True)
    p.finish()
    text = tty.getvalue()
    assert "1/4 done, 0 failed" in text and "4/4 done, 1 failed" in text and "ETA" in text
    assert text.endswith("\r")
    pipe = io.StringIO()
    Progress(4, pipe).update(2, 0, force=True)
    assert pipe.getvalue() == ""


def test_fd_limit_caps_parallel() -> None:
    assert 1 <= fd_limit_parallel(10_000_000) < 10_000_000
    assert fd_limit_parallel(4) == 4


@pytest.mark.slow
def test_replay_fleet_never_imports_paramiko() -> None:
    rec = next(iter(sorted((REPO / "fixtures" / "hosts").glob("*.yaml"))), None)
    if rec is None:
        pytest.skip("no recordings in fixtures/hosts yet")
    code = (
        "import sys\n"
        "from bsdcrypt.cli import main\n"
        "sys.argv = ['bsdcrypt', 'fleet-audit', '-', '-q', '-f', 'json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert 'paramiko' not in sys.modules, 'paramiko imported'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], input=f"replay:{rec}\n", capture_output=True, text=True, cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"hosts"' in proc.stdout


def test_rows_sort_by_address_and_naturally_within_a_verdict() -> None:
    from bsdcrypt.fleet import HostResult, failed_status
    from bsdcrypt.render.fleet import sort_results

    text = "127.1.0.19\nfw10\n127.1.0.1\n[::1]:22\nfw2\n127.1.0.2\nreplay:b10\nreplay:b9\n10.0.0.1\n"
    results = [HostResult(e, failed_status(e, "timeout", "x"), 0.0, "x", "timeout")
               for e in parse_hosts(text, "h").entries]
    assert [r.target for r in sort_results(results)] == [
        "10.0.0.1", "127.1.0.1", "127.1.0.2", "127.1.0.19", "[::1]:22", "fw2", "fw10", "replay:b9", "replay:b10",
    ]


def test_progress_redraws_while_no_host_finishes() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    now = [100.0]
    tty = Tty()
    p = Progress(3, tty, clock=lambda: now[0])
    p.update(0, 0, force=True)
    for t in (100.2, 100.6, 101.2, 102.0):
        now[0] = t
        p.tick()
    draws = [d for d in tty.getvalue().split("\r") if d.strip()]
    assert len(draws) == 4  # 100.0, 100.6, 101.2, 102.0 (100.2 was too soon)
    assert "0/3 done" in draws[-1] and "2s elapsed" in draws[-1]
    now[0] = 104.0
    p.update(1, 0)
    now[0] = 106.0
    p.tick()
    last = tty.getvalue().split("\r")[-1]
    assert "1/3 done" in last and "6s elapsed" in last and "ETA 12s" in last


@pytest.mark.slow
def test_run_fleet_keeps_the_progress_line_moving() -> None:
    """While a host takes its time, the bar is redrawn (the host waits until it has seen two redraws)."""

    class Tty(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.draws = 0
            self.redrawn = threading.Event()

        def isatty(self) -> bool:
            return True

        def write(self, s: str) -> int:
            if "0/1 done" in s:
                self.draws += 1
                if self.draws >= 3:
                    self.redrawn.set()
            return super().write(s)

    tty = Tty()

    class Patient:
        name = spec = "patient"

        def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
            tty.redrawn.wait(30)
            raise HostError("done waiting")

        def close(self) -> None:
            pass

    class A(Auditor):
        def make_host(self, entry):  # type: ignore[no-untyped-def]
            return Patient()

    opts = FleetOptions(timeout=60)
    tty_progress = Progress(1, tty)
    tty_progress.update(0, 0, force=True)
    run = run_fleet(parse_hosts("patient.example\n", "h").entries, opts, tty_progress, A(opts))
    assert tty.redrawn.is_set() and run.results[0].error == "done waiting"


@pytest.mark.slow
def test_bad_hosts_file_lines_one_per_line_and_help_shows_user(tmp_path: Path) -> None:
    path = tmp_path / "h.txt"
    path.write_text("ok.example\nnot a host\nx:0\n# fine\n[::1\n")
    cmd = [sys.executable, "-c", "from bsdcrypt.cli import main; main()"]
    run = subprocess.run([*cmd, "fleet-audit", str(path)], capture_output=True, text=True, cwd=REPO, check=False)
    assert run.returncode == 3
    lines = run.stderr.splitlines()
    assert [ln.split(": ", 1)[0] for ln in lines] == [f"{path}:2", f"{path}:3", f"{path}:5"], run.stderr
    for env in ({"COLUMNS": "300"}, {"COLUMNS": "300", "NO_COLOR": "1"}):
        help_run = subprocess.run([*cmd, "fleet-audit", "--help"], capture_output=True, text=True, cwd=REPO,
                                  env={**os.environ, **env}, check=False)
        text = " ".join(help_run.stdout.replace("│", " ").split())
        assert "One [user@]host[:port] or replay:PATH per line" in text, (env, help_run.stdout)
