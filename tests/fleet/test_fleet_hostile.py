"""fleet-audit against bad ssh configs and hostile listeners (issue 11, fleet/SSH part).

Every listener here is on 127.0.0.0/8 and started by the test; the output-cap tests use a small loopback
sshd fleet of their own (tests/fleet/loopback.py) with hosts that answer 16 MB of garbage.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.fleet import Auditor, FleetOptions, run_fleet
from bsdcrypt.hostsfile import parse_hosts
from bsdcrypt.probe import MAX_OUTPUT as PROBE_MAX_OUTPUT
from bsdcrypt.render.fleet import render
from bsdcrypt.ssh import SSHContext, SSHError, SSHHost
from bsdcrypt.ssh.client import byte_budget
from bsdcrypt.ssh.errors import shown_bytes
from bsdcrypt.ssh.includes import parse_port, parse_seconds

from .conftest import fleet_recordings, require_sshd, start_or_skip
from .loopback import LoopbackFleet

REPO = Path(__file__).resolve().parents[2]
NO_KNOWN_HOSTS = "Host *\n    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile none\n"
CONTROL = {chr(c) for c in range(32)} | {"\x7f"}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, unset=("SSH_AUTH_SOCK", "BSDCRYPT_SSH_CONFIG"))


# ---------------------------------------------------------------------------- ssh config values


@pytest.mark.parametrize(("value", "port"), [
    ("22", 22), ("1", 1), ("65535", 65535), ('"2222"', 2222), ("22 # the usual", 22), ("022", 22),
    ("0", None), ("65536", None), ("99999", None), ("abc", None), ("-1", None), ("22 23", None), ("", None),
    ("２２", None), ("22abc", None), ("0x16", None), ('"22', None),
    # strtonum takes leading zeros; a digit run past Python's int() limit is a bad port, not a traceback
    ("0000000000022", 22), ("9" * 5000, None), ("0" * 5000 + "22", 22),
])
def test_port_values_are_taken_as_ssh_takes_them(value: str, port: int | None) -> None:
    assert parse_port(value) == port


@pytest.mark.parametrize(("value", "seconds"), [
    ("30", 30), ("0", 0), ("1m30s", 90), ("2h", 7200), ("1W", 604800), ("10s # short", 10),
    ("abc", None), ("-5", None), ("1.5", None), ("30x", None), ("", None), ("m", None),
    # convtime (OpenSSH misc.c): a total past INT_MAX is a bad time value; 5,000 digits never reach int()
    ("2147483647", 2147483647), ("2147483648", None), ("35791394m", 2147483640), ("35791395m", None),
    ("9" * 5000, None), ("000000000030", 30),
])
def test_time_values_are_taken_as_ssh_takes_them(value: str, seconds: int | None) -> None:
    assert parse_seconds(value) == seconds


BAD_VALUES = [("Port", "abc"), ("Port", "0"), ("Port", "99999"), ("ConnectTimeout", "soon")]


def test_a_long_blank_run_inside_a_config_line_is_read_in_linear_time(tmp_path: Path) -> None:
    """A keyword, hundreds of thousands of blanks, then a value (within the 1 MiB a config may have): the
    line is split without a regex that backtracks over the blanks (a lazy `(.*?)\\s*$` took quadratic
    time here); the value is still checked as ssh checks it."""
    from bsdcrypt.ssh.errors import SSHError
    from bsdcrypt.ssh.includes import read_config

    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    Port" + " \t" * 200_000 + "x" + " " * 400_000 + "y\n")
    with pytest.raises(SSHError, match="line 2"):
        read_config(str(cfg))  # "x <blanks> y" is two words: a bad port, refused with the file's line
    cfg.write_text("Host *\n    Port" + " " * 450_000 + "2222" + " " * 450_000 + "\n")
    assert "2222" in read_config(str(cfg))


@pytest.mark.slow
@pytest.mark.parametrize(("keyword", "value"), BAD_VALUES)
@pytest.mark.parametrize("how", ["direct", "include", "env"])
def test_a_bad_config_value_is_one_line_not_a_traceback(tmp_path: Path, keyword: str, value: str, how: str) -> None:
    """`Port abc` (and 0, 99999, a bad ConnectTimeout) in a block that does not even match: ssh refuses the
    whole file ("line 3: Bad port"), and so does bsdcrypt, naming the file and line, for fleet-audit -F,
    an Include, and BSDCRYPT_SSH_CONFIG for status --host."""
    bad = tmp_path / "bad.conf"
    bad.write_text(f"Host elsewhere\n    User root\n    {keyword} {value}\n")
    cfg = bad
    if how == "include":
        cfg = tmp_path / "main.conf"
        cfg.write_text(f"Include {bad}\n" + NO_KNOWN_HOSTS)
    hosts = tmp_path / "hosts"
    hosts.write_text("root@127.5.0.1:1\nreplay:freebsd-13.0-hyperv-builtin\n")
    if how == "env":
        r = cli("status", "--host", "root@127.5.0.1:1", env={"BSDCRYPT_SSH_CONFIG": str(cfg)})
    else:
        r = cli("fleet-audit", str(hosts), "-F", str(cfg), "-q")
    assert r.returncode == 3, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{bad} line 3" in lines[0] and repr(value) in lines[0], lines[0]
    if how == "include":
        assert f"(Include at {cfg} line 1)" in lines[0]
    assert "refused" not in r.stderr and r.stdout == ""


def test_a_bad_config_value_is_a_row_per_ssh_host_when_the_run_goes_on(tmp_path: Path) -> None:
    """Outside the CLI (run_fleet without the strict check) each SSH host gets a config row; a replay is
    still audited."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    Port abc\n")
    entries = parse_hosts("root@127.5.0.1\nroot@127.5.0.2\nreplay:freebsd-13.0-hyperv-builtin\n", "h").entries
    run = run_fleet(entries, FleetOptions(timeout=5, ssh_config=str(cfg)))
    kinds = [r.error_kind for r in run.results]
    assert kinds == ["config", "config", None], [r.error for r in run.results]
    assert all("line 2: bad port 'abc'" in (r.error or "") for r in run.results[:2])


@pytest.mark.parametrize("hop", ["root@127.5.0.9:abc", "127.5.0.9:0", "127.5.0.9:99999", "[::1"])
def test_a_bad_proxy_jump_is_a_config_row(tmp_path: Path, hop: str) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host *\n    ProxyJump {hop}\n" + NO_KNOWN_HOSTS)
    run = run_fleet(parse_hosts("root@127.5.0.1:1\n", "h").entries, FleetOptions(timeout=5, ssh_config=str(cfg)))
    r = run.results[0]
    assert r.error_kind == "config", r.error
    # ssh -G refuses it naming the line; without ssh, bsdcrypt names the hop
    assert f"bad ProxyJump {hop!r}" in (r.error or "") or "line 2" in (r.error or ""), r.error


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12))
def test_any_port_value_is_a_port_or_a_config_error(value: str) -> None:
    """Property: whatever follows `Port`, a config either gives a port 1-65535 or is refused as a config
    error, never another exception."""
    if "\n" in value or "\r" in value:
        return
    port = parse_port(value)
    assert port is None or 1 <= port <= 65535
    path = f"/tmp/bsdcrypt-port-{os.getpid()}.conf"
    Path(path).write_text(f"Host *\n    Port {value}\n" + NO_KNOWN_HOSTS)
    try:
        ctx = SSHContext(path)
    except SSHError as exc:
        assert exc.kind == "config"
        return
    finally:
        os.unlink(path)
    try:
        target = ctx.target("h.example")
    except SSHError as exc:
        assert exc.kind == "config"
        return
    assert 1 <= target.port <= 65535


# ---------------------------------------------------------------------------- listeners that are not sshd


class Listener:
    """One TCP listener on loopback that answers each connection with `answer(conn)`, then holds the
    connection open until the test ends (or closes it, if `close`)."""

    def __init__(self, answer: Callable[[socket.socket], None], close: bool = False) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.6.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.answer, self.close_after = answer, close
        self.conns: list[socket.socket] = []
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            try:
                self.answer(conn)
            except OSError:
                pass
            if self.close_after:
                conn.close()

    def shutdown(self) -> None:
        self.stop.set()
        self.sock.close()
        for c in self.conns:
            c.close()


def _says(data: bytes) -> Callable[[socket.socket], None]:
    return lambda conn: conn.sendall(data)


def _floods(conn: socket.socket) -> None:
    chunk = b"\xfe" * 65536
    for _ in range(256):  # 16 MiB, no newline
        conn.sendall(chunk)


SMTP = b"220 mail.example.org ESMTP Postfix (Debian/GNU)\r\n"
HTTP = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
NOISE = b"\x00\xff\xfe\x1b]0;owned\x07\x1b[31m\x80\x81\n"

LISTENERS = {
    # name: (answer, close afterwards, expected kind, what the message must say)
    "smtp-greeting-held-open": (_says(SMTP), False, "no-ssh", "220 mail.example.org ESMTP"),
    "http-error-held-open": (_says(HTTP), False, "no-ssh", "HTTP/1.1 400 Bad Request"),
    "http-error-then-close": (_says(HTTP), True, "no-ssh", "HTTP/1.1 400 Bad Request"),
    "binary-noise-held-open": (_says(NOISE), False, "no-ssh", "\\x00\\xff\\xfe\\x1b]0;owned\\x07"),
    "binary-noise-then-close": (_says(NOISE), True, "no-ssh", "\\x00\\xff"),
    "noise-without-newline": (_says(b"\x00\x01garbage"), False, "no-ssh", "\\x00\\x01garbage"),
    "a-flood-without-newline": (_floods, False, "no-ssh", "\\xfe\\xfe"),
    "closes-at-once": (lambda conn: None, True, "closed", "closed the connection before the SSH banner"),
}


@pytest.fixture
def nokh(tmp_path: Path) -> SSHContext:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(NO_KNOWN_HOSTS)
    return SSHContext(str(cfg))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LISTENERS))
def test_what_a_listener_says_tells_no_ssh_from_closed(name: str, nokh: SSHContext) -> None:
    answer, close, kind, said = LISTENERS[name]
    listener = Listener(answer, close)
    host = SSHHost.from_spec(f"root@127.6.0.1:{listener.port}", nokh, timeout=6)
    try:
        with pytest.raises(SSHError) as caught:
            host.connect()
    finally:
        host.close()
        listener.shutdown()
    err = caught.value
    assert err.kind == kind, str(err)
    assert said in str(err), str(err)
    assert not CONTROL & set(str(err)), repr(str(err))  # the peer's bytes are shown escaped
    assert len(str(err)) < 300


@pytest.mark.slow
def test_a_non_ssh_listener_is_a_no_ssh_row_in_the_fleet(tmp_path: Path) -> None:
    listener = Listener(_says(SMTP))
    cfg = tmp_path / "ssh_config"
    cfg.write_text(NO_KNOWN_HOSTS)
    try:
        entries = parse_hosts(f"root@127.6.0.1:{listener.port}\n", "h").entries
        run = run_fleet(entries, FleetOptions(timeout=6, ssh_config=str(cfg)))
    finally:
        listener.shutdown()
    r = run.results[0]
    assert r.error_kind == "no-ssh", r.error
    assert "does not speak SSH: it sent '220 mail.example.org" in (r.error or "")


def _announces_a_huge_packet(conn: socket.socket) -> None:
    """An SSH banner, then a packet header whose length says 1 GiB, then zeros for as long as it is read."""
    import struct

    conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n" + struct.pack(">I", (1 << 30) - 4) + b"\x04")
    zeros = b"\0" * 65536
    for _ in range(2048):  # at most 128 MiB, then hold the connection
        conn.sendall(zeros)


def test_a_packet_longer_than_ssh_accepts_ends_the_host_within_its_byte_budget(nokh: SSHContext) -> None:
    """A hostile host announcing a 1 GiB packet and sending zeros: the socket's byte budget ends the host
    (a protocol row naming the phase), long before its deadline and without gathering the gigabyte."""
    listener = Listener(_announces_a_huge_packet)
    host = SSHHost.from_spec(f"root@127.6.0.1:{listener.port}", nokh, timeout=60, max_output=1 << 20)
    try:
        with pytest.raises(SSHError) as caught:
            host.run("true")
    finally:
        host.close()
        listener.shutdown()
    err = caught.value
    assert err.kind == "protocol", str(err)
    assert "the rest was not read" in str(err), str(err)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_shown_bytes_is_printable_and_short(data: bytes) -> None:
    text = shown_bytes(data)
    assert text.isascii() or text.endswith("…")
    assert not CONTROL & set(text)
    assert len(text) <= 60 + 8
    if data and all(32 <= b < 127 and b not in b"\\'" for b in data[:20]):
        assert text.startswith("'" + data[:20].decode())


# ---------------------------------------------------------------------------- hosts that answer too much


FLOOD = {"127.8.0.2": "flood", "127.8.0.3": "flood-stderr"}
HEALTHY = "127.8.0.1"
LARGE = "127.8.0.4"  # a real recording whose dmesg.boot is padded to ~900 KB: big, but a probe's answer


def _padded_recording(src: Path, dest: Path, size: int) -> Path:
    """A real recording with its dmesg.boot repeated up to `size` bytes (the largest plausible probe)."""
    from bsdcrypt import recording
    from bsdcrypt.probe import Evidence, Step

    _, evidence = recording.load(src)
    key = "file:/var/run/dmesg.boot"
    st_ = evidence.steps[key]
    out = st_.out * (size // max(1, len(st_.out)))
    steps = dict(evidence.steps) | {key: Step(st_.rc, out[:size])}
    dest.write_text(recording.dump(Evidence(steps), "host.example", comment=f"{src.name}, dmesg.boot repeated"))
    return dest


@pytest.fixture(scope="module")
def flood_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoopbackFleet, Path]]:
    require_sshd()
    work = tmp_path_factory.mktemp("flood-fleet")
    recs = [r for r in fleet_recordings(work) if r.name.startswith("freebsd-13.0-hyperv")] or fleet_recordings(work)
    fleet = LoopbackFleet(work / "fleet")
    fleet.add(HEALTHY, "replay", recs[0])
    for addr, kind in FLOOD.items():
        fleet.add(addr, kind, recs[0])
    with_dmesg = [r for r in sorted((REPO / "fixtures" / "hosts").glob("freebsd-*.yaml"))
                  if "/var/run/dmesg.boot" in r.read_text()]
    large = _padded_recording((with_dmesg or recs)[0], work / "large.yaml", 900_000)
    fleet.add(LARGE, "replay", large)
    start_or_skip(fleet, HEALTHY)
    try:
        yield fleet, large
    finally:
        fleet.stop()


@pytest.mark.slow
def test_a_host_answering_16_mb_is_cut_at_the_probe_cap(
    flood_fleet: tuple[LoopbackFleet, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hostile host answering 16 MB (on stdout or on stderr) is a `garbage` row after at most the cap
    (1 MiB) plus one read: the client stops reading there, it does not buffer the whole answer."""
    fleet, _ = flood_fleet
    taken: dict[str, int] = {}
    lock = threading.Lock()
    real_recv = socket.socket.recv

    def recv(self: socket.socket, n: int, *flags: int) -> bytes:  # every byte the client takes from TCP
        data = real_recv(self, n, *flags)
        try:
            addr = str(self.getpeername()[0])
        except OSError:
            addr = ""
        with lock:
            taken[addr] = taken.get(addr, 0) + len(data)
        return data

    monkeypatch.setattr(socket.socket, "recv", recv)
    entries = parse_hosts("".join(f"{fleet.spec(a)}\n" for a in [HEALTHY, *FLOOD]), "h").entries
    run = run_fleet(entries, FleetOptions(timeout=30, ssh_config=str(fleet.ssh_config)))
    by = {r.entry.host: r for r in run.results}
    assert by[HEALTHY].error is None, by[HEALTHY].error
    for addr in FLOOD:
        r = by[addr]
        assert r.error_kind == "garbage", (addr, r.error)
        assert "printed more than 1 MiB" in (r.error or "") and "not read" in (r.error or ""), r.error
        assert taken[addr] <= byte_budget(PROBE_MAX_OUTPUT) + 65536, (addr, taken[addr])  # the socket's budget
    rows = render(run, "table")
    assert "garbage: the host printed more than 1 MiB" in rows


@pytest.mark.slow
def test_a_large_real_probe_answer_is_audited_like_its_recording(flood_fleet: tuple[LoopbackFleet, Path]) -> None:
    """Below the cap nothing changes: a ~900 KB answer (a real recording with dmesg.boot padded) gives the
    same status over SSH as the recording replayed."""
    from bsdcrypt.hosts.replay import ReplayHost
    from bsdcrypt.pipeline import status_of

    fleet, large = flood_fleet
    entries = parse_hosts(f"{fleet.spec(LARGE)}\n", "h").entries
    run = run_fleet(entries, FleetOptions(timeout=30, ssh_config=str(fleet.ssh_config)))
    r = run.results[0]
    assert r.error is None, r.error
    replayed = status_of(ReplayHost.from_file(large), timeout=30).to_dict()
    over_ssh = r.status.to_dict()
    for key in ("host", "source"):
        replayed.pop(key, None)
        over_ssh.pop(key, None)
    assert over_ssh == replayed


# ---------------------------------------------------------------------------- the source of a replay


@pytest.mark.parametrize("form", ["name", "name.yaml", "relative", "absolute"])
def test_a_replay_source_is_what_the_hosts_line_says(tmp_path: Path, form: str) -> None:
    """`source` of a replay: line is `replay:` and the line's own text, in JSON, CSV and Prometheus alike,
    as `status --host replay:...` says it: never the folder a shipped recording is installed in."""
    name = "freebsd-13.0-hyperv-builtin"
    shipped = REPO / "fixtures" / "hosts" / f"{name}.yaml"
    (tmp_path / "recs").mkdir()
    (tmp_path / "recs" / "mine.yaml").write_bytes(shipped.read_bytes())
    written = {"name": name, "name.yaml": f"{name}.yaml", "relative": "recs/mine.yaml",
               "absolute": str(tmp_path / "recs" / "mine.yaml")}[form]
    entries = parse_hosts(f"replay:{written}\n", "h", base_dir=str(tmp_path)).entries
    opts = FleetOptions()
    run = run_fleet(entries, opts, auditor=Auditor(opts))
    assert run.results[0].error is None, run.results[0].error
    want = f"replay:{written}"
    doc = json.loads(render(run, "json"))
    assert doc["hosts"][0]["source"] == want
    prom = render(run, "prometheus")
    labels = [ln for ln in prom.splitlines() if ln.startswith("bsdcrypt_info{")]
    assert labels and all(f'source="{want}"' in ln for ln in labels), labels
    assert str(REPO) not in prom and str(REPO) not in json.dumps(doc)
    if form in ("name", "name.yaml", "absolute"):  # where status --host resolves it the same way
        status = cli("status", "--host", want, "-f", "json")
        assert json.loads(status.stdout)["source"] == want
