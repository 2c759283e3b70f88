"""SSHHost(single_run=True): fleet-audit's one exec a host with paramiko's loop in the caller's thread
(bsdcrypt/ssh/oneshot.py), against a real OpenSSH sshd: the same results and errors as the threaded
path, no thread started, a script and an output larger than the channel windows, the output limit,
authentication with a refused key first, the deadline and the watchdog's abort."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bsdcrypt.ssh import SSHContext, SSHError, SSHHost

from .conftest import FleetEnv, require_sshd, start_or_skip
from .loopback import LoopbackFleet

SH_ADDR = "127.5.0.1"
REKEY_ADDR = "127.5.0.2"


def _shell_fleet(factory: pytest.TempPathFactory, name: str, addr: str, **options: list[str]) -> Iterator[LoopbackFleet]:
    """A real sshd whose one host runs the exec'd command with /bin/sh."""
    require_sshd()
    fleet = LoopbackFleet(factory.mktemp(name) / "fleet", **options)
    fleet.add(addr, "shell", shell="/bin/sh")
    start_or_skip(fleet, addr)
    try:
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture(scope="module")
def sh_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackFleet]:
    yield from _shell_fleet(tmp_path_factory, "sshd-oneshot", SH_ADDR)


@pytest.fixture(scope="module")
def rekey_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackFleet]:
    """An sshd that starts a new key exchange after every 64 KiB (RekeyLimit, sshd_config(5))."""
    yield from _shell_fleet(tmp_path_factory, "sshd-rekey", REKEY_ADDR, sshd_options=["RekeyLimit 64K"])


def host(fleet: LoopbackFleet, single: bool, config: Path | None = None, addr: str = SH_ADDR,
         **kw: object) -> SSHHost:
    ctx = SSHContext(str(config or fleet.ssh_config))
    return SSHHost.from_spec(fleet.spec(addr), ctx, timeout=kw.pop("timeout", 60),  # type: ignore[arg-type]
                             single_run=single, **kw)  # type: ignore[arg-type]


COMMAND = "printf 'out\\n'; printf 'err' >&2; cat; exit 3"
INPUT = bytes(range(256)) * 3 + b"no final newline"


def test_single_run_gives_what_the_threaded_run_gives_without_a_thread(
        sh_fleet: LoopbackFleet, monkeypatch: pytest.MonkeyPatch) -> None:
    threaded = host(sh_fleet, single=False)
    try:
        want = threaded.run(COMMAND, input=INPUT)
    finally:
        threaded.close()
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(type(self).__name__)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    single = host(sh_fleet, single=True)
    got = single.run(COMMAND, input=INPUT)
    assert started == []  # paramiko's transport thread included
    assert got == want
    assert (got.rc, got.stdout, got.stderr) == (3, b"out\n" + INPUT, b"err")
    assert (single.connections, single.execs) == (1, 1)
    again = single.run("echo again")  # a second run is a second connection
    assert (again.rc, again.stdout, single.connections, single.execs) == (0, b"again\n", 2, 2)
    empty = single.run("")  # nothing to send: the EOF still goes out, sh -s ends
    assert (empty.rc, empty.stdout) == (0, b"")


def test_a_script_and_an_output_larger_than_the_windows(sh_fleet: LoopbackFleet) -> None:
    """sshd's channel window is 2 MiB and bsdcrypt's 2 MiB here: ~5 MiB of script (3 MiB of input spelled
    by printf) must go out as the server's window adjustments allow, and 3 MiB come back as ours do."""
    data = os.urandom(3 << 20)
    got = host(sh_fleet, single=True).run("cat", input=data)
    assert got.rc == 0 and got.stdout == data


def test_keys_exchanged_again_by_the_server_mid_run(rekey_fleet: LoopbackFleet) -> None:
    """The server re-keys while the script goes out and the output comes back (the client carries those
    exchanges through between two messages) and every byte still arrives."""
    data = os.urandom(1 << 20)
    h = host(rekey_fleet, single=True, addr=REKEY_ADDR, timeout=120)
    got = h.run("cat", input=data)
    assert got.rc == 0 and got.stdout == data
    assert h.key_exchanges > 2  # the first exchange, and the server's again (RekeyLimit 64K, 2 MiB through)
    assert h.fallbacks == 0  # bsdcrypt's own client, not paramiko's loop


def test_keys_exchanged_again_mid_run_through_paramikos_loop(rekey_fleet: LoopbackFleet, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through a ProxyCommand, where fleet-audit's single run uses paramiko's loop: the loop
    carries the server's exchanges through itself (its steps wait for them: the tests below)."""
    import paramiko

    seen: list[int] = []
    real = paramiko.Transport._parse_kex_init  # type: ignore[attr-defined]

    def counted(self: paramiko.Transport, m: object) -> None:
        seen.append(1)
        real(self, m)

    monkeypatch.setattr(paramiko.Transport, "_parse_kex_init", counted)
    relay = "bash -c 'exec 3<>/dev/tcp/%h/%p; cat <&3 & exec cat >&3'"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(rekey_fleet.ssh_config.read_text().replace("Host *\n", f"Host *\n    ProxyCommand {relay}\n", 1))
    data = os.urandom(1 << 20)
    h = host(rekey_fleet, single=True, config=cfg, addr=REKEY_ADDR, timeout=120)
    got = h.run("cat", input=data)
    assert got.rc == 0 and got.stdout == data
    assert len(seen) > 2  # the first exchange, and the server's again
    assert h.key_exchanges == 0  # none of them by the direct client


def test_output_over_the_limit_is_garbage_not_a_timeout(sh_fleet: LoopbackFleet) -> None:
    h = host(sh_fleet, single=True, max_output=64 << 10, timeout=600)
    with pytest.raises(SSHError) as info:
        h.run("head -c 4194304 /dev/zero")
    assert info.value.kind == "garbage", str(info.value)
    assert "more than 64 KiB" in str(info.value)


def _config_with_keys(fleet: LoopbackFleet, tmp_path: Path, keys: list[Path]) -> Path:
    text = fleet.ssh_config.read_text()
    lines = [ln for ln in text.splitlines() if "IdentityFile" not in ln]
    lines[1:1] = [f"    IdentityFile {k}" for k in keys]
    cfg = tmp_path / "ssh_config"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def _stranger_key(tmp_path: Path) -> Path:
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


@pytest.mark.parametrize("single", [True, False], ids=["single-run", "threaded"])
def test_a_refused_key_then_the_authorized_one(sh_fleet: LoopbackFleet, tmp_path: Path, single: bool) -> None:
    stranger = _stranger_key(tmp_path)
    cfg = _config_with_keys(sh_fleet, tmp_path, [stranger, sh_fleet.client_key])
    h = host(sh_fleet, single=single, config=cfg)
    try:
        assert h.run("echo in").stdout == b"in\n"
    finally:
        h.close()
    only = _config_with_keys(sh_fleet, tmp_path, [stranger])
    h = host(sh_fleet, single=single, config=only)
    with pytest.raises(SSHError) as info:
        try:
            h.run("echo in")
        finally:
            h.close()
    assert info.value.kind == "auth"
    assert f"tried {stranger}" in str(info.value), str(info.value)


def test_the_deadline_ends_a_single_run_as_a_timeout(loopback_fleet: FleetEnv) -> None:
    """The slow fake host answers nothing until the fleet stops; the deadline, checked at each of the
    loop's 1 s socket polls, ends the run as a timeout naming the phase."""
    ctx = SSHContext(str(loopback_fleet.fleet.ssh_config))
    h = SSHHost.from_spec(loopback_fleet.spec("127.2.0.1"), ctx, timeout=2, single_run=True)
    with pytest.raises(SSHError) as info:
        h.run("echo x")
    assert info.value.kind == "timeout"
    assert "during reading the output" in str(info.value), str(info.value)


def test_an_abort_ends_a_single_run_naming_the_phase(loopback_fleet: FleetEnv) -> None:
    from bsdcrypt.probe import PROBE_MAGIC

    ctx = SSHContext(str(loopback_fleet.fleet.ssh_config))
    h = SSHHost.from_spec(loopback_fleet.spec("127.2.0.1"), ctx, timeout=600, single_run=True)
    reading = threading.Event()

    def abort_when_reading() -> None:
        while not reading.wait(0.02):
            if h.phase == "reading the output":
                reading.set()
        h.abort()

    watchdog = threading.Thread(target=abort_when_reading, daemon=True)
    watchdog.start()
    with pytest.raises(SSHError) as info:
        h.run(f"echo {PROBE_MAGIC}; T=x")
    watchdog.join(60)
    assert info.value.kind == "timeout"
    assert "during reading the output" in str(info.value), str(info.value)


def test_no_step_runs_while_keys_are_exchanged_again() -> None:
    """paramiko holds every message sent during a key exchange until it ends, and only the loop can carry
    the exchange through: a step that sent then would wait for itself. Steps wait for the exchange."""
    import socket
    import time as _time

    from bsdcrypt.ssh.oneshot import Loop, LoopTransport

    a, b = socket.socketpair()
    try:
        transport = LoopTransport(a)
        loop = Loop(transport, deadline=_time.monotonic() + 60)
        ran: list[str] = []
        loop.later(lambda: ran.append("step")).set()
        transport.in_kex = True
        assert loop.between_messages() is False and ran == []
        transport.in_kex = False
        assert loop.between_messages() is False and ran == ["step"]
        loop.watch = lambda: True
        assert loop.between_messages() is True and loop.finished and not transport.active
    finally:
        a.close()
        b.close()


def test_a_failing_step_ends_the_loop_with_its_error() -> None:
    import socket
    import time as _time

    from bsdcrypt.ssh.oneshot import Loop, LoopTransport

    a, b = socket.socketpair()
    try:
        transport = LoopTransport(a)
        transport.active = True
        loop = Loop(transport, deadline=_time.monotonic() + 60)

        def fail() -> None:
            raise SSHError("auth", "refused")

        loop.later(fail).set()
        assert loop.between_messages() is True
        assert isinstance(loop.error, SSHError) and not loop.finished and not transport.active
    finally:
        a.close()
        b.close()


def test_key_derivation_is_paramikos() -> None:
    """bsdcrypt derives the session keys itself (K and H encoded once an exchange): the same bytes as
    paramiko's Transport for every key letter and length, K as an mpint (curve25519, ECDH) or a string
    (hybrid post-quantum exchanges)."""
    import hashlib
    import os
    import socket

    import paramiko

    from bsdcrypt.ssh.transport import session_key

    class Engine:
        hash_algo = hashlib.sha256

    a, b = socket.socketpair()
    try:
        theirs = paramiko.Transport(b)
        theirs.kex_engine = Engine()
        for k in (int.from_bytes(os.urandom(32), "big"), 1 << 255, 5, os.urandom(32)):
            h = os.urandom(32)
            theirs.K, theirs.H, theirs.session_id = k, h, b"first" + h
            m = paramiko.Message()
            if isinstance(k, bytes):
                m.add_string(k)
            else:
                m.add_mpint(k)
            m.add_bytes(h)
            for letter in "ABCDEF":
                for size in (12, 16, 32, 33, 64, 100):
                    want = theirs._compute_key(letter, size)
                    assert session_key(hashlib.sha256, m.asbytes(), letter, b"first" + h, size) == want
    finally:
        a.close()
        b.close()


def test_wire_socket_take_serves_only_what_it_holds() -> None:
    """`take` gives the next n bytes only when the buffer holds them all, and never reads the socket;
    `recv` and `take` share one buffer in order."""
    import socket

    from bsdcrypt.ssh.transport import WireSocket

    a, b = socket.socketpair()
    try:
        w = WireSocket(a)
        assert w.take(4) is None  # nothing buffered: no read
        b.sendall(b"0123456789")
        assert w.recv(3) == b"012"  # one read buffers the rest
        assert w.take(4) == b"3456"
        assert w.take(4) is None  # 3 bytes left
        assert w.take(0) is None
        assert w.recv(10) == b"789"
        assert w.take(1) is None
        b.sendall(b"abcdef")
        assert w.recv(2) == b"ab" and w.take(4) == b"cdef" and w.take(1) is None
    finally:
        a.close()
        b.close()
