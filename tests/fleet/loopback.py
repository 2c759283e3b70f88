"""A fleet of fake FreeBSD hosts served by real OpenSSH sshd processes on 127.0.0.0/8.

Used by tests/fleet (session fixture) and benchmarks/fleet_bench.py. Nothing here listens on or
connects to an address outside 127.0.0.0/8.

Each fake host is one loopback address. sshd runs with a ForceCommand (fakehost.sh) that picks
the host by the local address in $SSH_CONNECTION, reads the probe script from stdin, takes the
per-run token from its `T=` line and prints the host's recording rendered with that token
(pre-rendered once, with a placeholder, by bsdcrypt.probe.render). sshd accepts at most 16
listen addresses per process, so the fleet is split over several sshd processes on one port.
Faulty behaviours are chosen per address: slow, garbage, flood and flood-stderr (`flood_bytes` of
random bytes on stdout or stderr), cut (output killed mid-way),
auth-refused (another authorized_keys), wrong-key (known_hosts holds another key), unknown-key
(absent from known_hosts), plus a closed port and a TCP listener that never speaks SSH (`silent_addr`,
and as many more as `blackholes` lists). A `shell` host is no fake: it runs the exec'd command for
real on this machine through the login shell named by FakeHost.shell (e.g. tcsh), as sshd would
with that user's shell. A `chroot` host (the benchmark's,
benchmarks/fakehosts.py; needs root) runs the exec'd command for real with /bin/sh inside
FakeHost.root, a tree that answers like the recorded FreeBSD host.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
PLACEHOLDER = "@@bsdcrypt-fakehost0000"
MAX_LISTEN = 16  # sshd's MAX_LISTEN_SOCKS
# Every test sshd: key logins only, no PAM, no DNS, no checks of the test files' modes, quiet logins.
SSHD_LOGIN_OPTIONS = (
    "PermitRootLogin prohibit-password",
    "PubkeyAuthentication yes",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    "UsePAM no",
    "StrictModes no",
    "UseDNS no",
    "PrintMotd no",
)

FAKEHOST_SH = r"""#!/bin/sh
# bsdcrypt test fleet: answer the probe as the host bound to this local address.
D='@DIR@'
L=$1
set -- $SSH_CONNECTION
A=$3
[ "$A" = "$L" ] || { echo "fakehost: SSH_CONNECTION says $A, sshd_config says $L" >&2; exit 125; }
# A host that really runs the command, in its own root (sshd would run `$SHELL -c COMMAND`).
if [ -d "$D/$A.root" ]; then exec /usr/sbin/chroot "$D/$A.root" /bin/sh -c "$SSH_ORIGINAL_COMMAND"; fi
# A real host whose login shell is the one named in $A.shell: sshd runs `$SHELL -c COMMAND`.
if [ -f "$D/$A.shell" ]; then
  printf '%s\n' "$SSH_ORIGINAL_COMMAND" >> "$D/$A.commands"
  exec "$(cat "$D/$A.shell")" -c "$SSH_ORIGINAL_COMMAND"
fi
case "$SSH_ORIGINAL_COMMAND" in
  '/bin/sh -s') ;;
  # garbage and flood hosts answer any command so (a tool that sends the probe another way: pyinfra's sh -c)
  *) if [ -f "$D/$A.garbage" ]; then exec cat "$D/$A.garbage"; fi
     if [ -f "$D/$A.flood" ]; then exec head -c "$(cat "$D/$A.flood")" /dev/urandom; fi
     echo "fakehost: unexpected command: $SSH_ORIGINAL_COMMAND" >&2; exit 126 ;;
esac
T=$(sed -n 's/^T=//p')
# slow: hold the session (answering nothing) until the fleet is stopped, or for $A.slow seconds at most
if [ -f "$D/$A.slow" ]; then
  n=0; cap=$(cat "$D/$A.slow")
  while [ "$n" -lt "$cap" ] && [ ! -e "$D/released" ]; do sleep 1; n=$((n + 1)); done
  exit 0
fi
if [ -f "$D/$A.garbage" ]; then exec cat "$D/$A.garbage"; fi
if [ -f "$D/$A.flood" ]; then exec head -c "$(cat "$D/$A.flood")" /dev/urandom; fi
if [ -f "$D/$A.flood-stderr" ]; then exec head -c "$(cat "$D/$A.flood-stderr")" /dev/urandom >&2; fi
if [ -f "$D/$A.cut" ]; then
  head -c "$(cat "$D/$A.cut")" "$D/$A.out" | sed "s/@PH@/$T/g"
  kill -9 $$
fi
exec sed "s/@PH@/$T/g" "$D/$A.out"
"""


def login_name() -> str:
    """Who runs the tests: the fake hosts are logged into as this user. An sshd not started by root can
    only let its own user in, so a non-root run (a developer's) logs in as itself; CI runs as root."""
    return pwd.getpwuid(os.geteuid()).pw_name


def healthy_address(i: int) -> str:
    """The i-th healthy fake host: 127.1.0.1, 127.1.0.2, ... (250 per /24)."""
    return f"127.1.{i // 250}.{i % 250 + 1}"


def _check_loopback(addr: str) -> None:
    if ipaddress.ip_address(addr) not in ipaddress.ip_network("127.0.0.0/8"):
        raise ValueError(f"{addr} is outside 127.0.0.0/8")


def _free_port(addrs: list[str]) -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind((addrs[0], 0))
            port = int(s.getsockname()[1])
        ok = True
        for a in addrs[1:4]:
            with socket.socket() as s:
                try:
                    s.bind((a, port))
                except OSError:
                    ok = False
                    break
        if ok:
            return port
    raise RuntimeError("no free port on loopback")


@dataclass
class FakeHost:
    addr: str
    kind: str  # replay, slow, garbage, flood, flood-stderr, cut, auth-refused, wrong-key, unknown-key, shell, chroot
    recording: str | None = None  # path of the recording it answers from
    shell: str | None = None  # kind "shell": the login shell that runs the command (for real)
    root: str | None = None  # kind "chroot": the tree the command runs in


@dataclass
class LoopbackFleet:
    workdir: Path
    sshd: str = SSHD
    port: int = 0
    hosts: dict[str, FakeHost] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    silent_addr: str = "127.3.0.2"  # accepts TCP, never speaks
    blackholes: list[str] = field(default_factory=list)  # more addresses like silent_addr (a fleet's share of them)
    closed_addr: str = "127.3.0.1"  # nothing listens
    slow_seconds: int = 20
    flood_bytes: int = 16 * 1024 * 1024  # what a `flood` host answers (a hostile host's garbage)
    user: str = field(default_factory=login_name)
    sshd_options: list[str] = field(default_factory=list)  # more global sshd_config lines (e.g. RekeyLimit)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.hostdir = self.workdir / "hosts"
        self.hostdir.mkdir(exist_ok=True)
        (self.workdir / "home").mkdir(exist_ok=True)
        self._silent_socks: list[socket.socket] = []
        self._silent_conns: list[socket.socket] = []
        self._stop = threading.Event()

    # -- building the fleet

    def add(
        self, addr: str, kind: str = "replay", recording: str | Path | None = None, shell: str | None = None,
        root: str | Path | None = None,
    ) -> FakeHost:
        _check_loopback(addr)
        host = FakeHost(addr, kind, str(recording) if recording else None, shell, str(root) if root else None)
        self.hosts[addr] = host
        return host

    @property
    def log_files(self) -> list[Path]:
        return sorted(self.workdir.glob("sshd.*.log"))

    def _keygen(self, name: str) -> Path:
        path = self.workdir / name
        if not path.exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)],
                check=True,
                stdin=subprocess.DEVNULL,
            )
        return path

    def _render(self, host: FakeHost) -> None:
        from bsdcrypt.probe import render
        from bsdcrypt.recording import load

        out = self.hostdir / f"{host.addr}.out"
        if host.kind == "chroot":
            out.write_bytes(b"")
            (self.hostdir / f"{host.addr}.root").symlink_to(host.root or "/nonexistent")
            return
        if host.recording:
            _, evidence = load(Path(host.recording))
            out.write_bytes(render(evidence, PLACEHOLDER))
        else:
            out.write_bytes(b"")
        if host.kind == "shell":
            (self.hostdir / f"{host.addr}.shell").write_text(host.shell or "/bin/sh")
        elif host.kind == "slow":
            (self.hostdir / f"{host.addr}.slow").write_text(str(self.slow_seconds))
        elif host.kind == "garbage":
            (self.hostdir / f"{host.addr}.garbage").write_bytes(
                b"Welcome to FreeBSD!\n\x00\xff\xfe random login noise, no probe frames here\n"
            )
        elif host.kind in ("flood", "flood-stderr"):
            (self.hostdir / f"{host.addr}.{host.kind}").write_text(str(self.flood_bytes))
        elif host.kind == "cut":
            size = out.stat().st_size
            (self.hostdir / f"{host.addr}.cut").write_text(str(max(200, size // 3)))

    def start(self) -> None:
        if not os.path.isfile(self.sshd):
            raise FileNotFoundError(self.sshd)
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
        self.host_key = self._keygen("ssh_host_ed25519_key")
        self.other_host_key = self._keygen("other_host_ed25519_key")
        self.client_key = self._keygen("client_ed25519")
        self.stranger_key = self._keygen("stranger_ed25519")
        (self.workdir / "authorized_keys").write_text((self.workdir / "client_ed25519.pub").read_text())
        (self.workdir / "stranger_keys").write_text((self.workdir / "stranger_ed25519.pub").read_text())
        script = FAKEHOST_SH.replace("@DIR@", str(self.hostdir)).replace("@PH@", PLACEHOLDER)
        (self.workdir / "fakehost.sh").write_text(script)
        for host in self.hosts.values():
            self._render(host)
        addrs = list(self.hosts)
        self.port = self.port or _free_port(addrs)
        self._start_silent_listener()
        groups = [addrs[i:i + MAX_LISTEN] for i in range(0, len(addrs), MAX_LISTEN)]
        for n, group in enumerate(groups):
            self._start_sshd(n, group)
        self._wait_listening(addrs)
        self._write_client_files()

    def _start_sshd(self, n: int, addrs: list[str]) -> None:
        w = self.workdir
        lines = [
            f"Port {self.port}",
            *(f"ListenAddress {a}" for a in addrs),
            f"HostKey {self.host_key}",
            f"PidFile {w}/sshd.{n}.pid",
            f"AuthorizedKeysFile {w}/authorized_keys",
            *SSHD_LOGIN_OPTIONS,
            "PrintLastLog no",
            "MaxStartups 4000",
            "MaxSessions 4",
            "LoginGraceTime 60",
            "AllowTcpForwarding yes",
            "LogLevel VERBOSE",
            # The login shell runs the ForceCommand; bash started by sshd sources ~/.bashrc, which on a
            # developer machine can take 150 ms (pyenv init): point HOME at an empty folder.
            f"SetEnv HOME={w}/home",
            f"ForceCommand /bin/sh {w}/fakehost.sh",
            *self.sshd_options,
        ]
        for a in addrs:
            # The address is passed to the ForceCommand only so that sshd's "Starting session" line
            # names it: the log counts exec requests per host exactly (fakehost.sh checks it).
            lines += [f"Match LocalAddress {a}", f"    ForceCommand /bin/sh {w}/fakehost.sh {a}"]
            if self.hosts[a].kind == "auth-refused":
                lines.append(f"    AuthorizedKeysFile {w}/stranger_keys")
        cfg = w / f"sshd.{n}.conf"
        cfg.write_text("\n".join(lines) + "\n")
        log = w / f"sshd.{n}.log"
        log.write_text("")  # sshd -E appends; readiness is read from this log
        proc = subprocess.Popen(
            [self.sshd, "-D", "-f", str(cfg), "-E", str(log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.procs.append(proc)

    def _wait_listening(self, addrs: list[str], timeout: float = 20.0) -> None:
        # sshd logs "Server listening on ADDR port PORT." per address; no probing connections.
        want = set(addrs)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            seen: set[str] = set()
            for log in self.log_files:
                seen.update(re.findall(r"Server listening on (\S+) port", log.read_text(errors="replace")))
            if want <= seen:
                return
            for p in self.procs:
                if p.poll() is not None:
                    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
                    raise RuntimeError(f"sshd exited with {p.returncode}: {err.strip()[:500]}")
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen on {sorted(want - seen)[:5]} within {timeout}s")

    def _start_silent_listener(self) -> None:
        for addr in (self.silent_addr, *self.blackholes):
            _check_loopback(addr)
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, self.port))
            s.listen(64)
            s.settimeout(0.2)
            self._silent_socks.append(s)
            threading.Thread(target=self._hold_silent, args=(s,), name=f"silent-{addr}", daemon=True).start()

    def _hold_silent(self, s: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = s.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._silent_conns.append(conn)  # held open, never written to

    def _write_client_files(self) -> None:
        pub = (self.workdir / "ssh_host_ed25519_key.pub").read_text().split()
        other = (self.workdir / "other_host_ed25519_key.pub").read_text().split()
        lines = []
        for a, h in self.hosts.items():
            if h.kind == "unknown-key":
                continue
            key = other if h.kind == "wrong-key" else pub
            lines.append(f"[{a}]:{self.port} {key[0]} {key[1]}")
        self.known_hosts = self.workdir / "known_hosts"
        self.known_hosts.write_text("\n".join(lines) + "\n")
        self.ssh_config = self.workdir / "ssh_config"
        self.ssh_config.write_text(
            "Host *\n"
            f"    User {self.user}\n"
            f"    IdentityFile {self.client_key}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.known_hosts}\n"
            "    GlobalKnownHostsFile none\n"
            "    HashKnownHosts no\n"
        )

    def spec(self, addr: str) -> str:
        return f"{self.user}@{addr}:{self.port}"

    # -- the sshd log

    def log_mark(self) -> dict[Path, int]:
        return {p: p.stat().st_size for p in self.log_files}

    def _log_texts(self, since: dict[Path, int] | None) -> list[str]:
        parts = []
        for p in self.log_files:
            with p.open("rb") as fh:
                fh.seek((since or {}).get(p, 0))
                parts.append(fh.read().decode(errors="replace"))
        return parts

    def ptys(self, since: dict[Path, int] | None = None) -> Counter[str]:
        """Sessions with a pseudo-terminal per local address: with one, sshd's VERBOSE "Starting session"
        line names the tty after the command ("... fakehost.sh ADDR' on pts/3 for USER from ...")."""
        text = "".join(self._log_texts(since))
        return Counter(re.findall(r"Starting session: [^\n]*?fakehost\.sh (\S+)' on \S+ for ", text))

    def counts(self, since: dict[Path, int] | None = None) -> tuple[Counter[str], Counter[str]]:
        """(connections per local address, exec requests per local address) in the sshd logs."""
        text = "".join(self._log_texts(since))
        conns = Counter(re.findall(r"Connection from \S+ port \d+ on (\S+) port \d+", text))
        execs = Counter(re.findall(r"Starting session: (?:forced-command|command)\b[^\n]*?fakehost\.sh (\S+)'", text))
        return conns, execs

    def counts_when(
        self, since: dict[Path, int] | None, done: Callable[[Counter[str], Counter[str]], bool], timeout: float = 30.0
    ) -> tuple[Counter[str], Counter[str]]:
        """counts() once `done(conns, execs)` holds: sshd writes its lines after the client has gone, so a
        test waits for the lines it expects (the timeout is a safety net; the caller's asserts then fail)."""
        end = time.monotonic() + timeout
        while True:
            conns, execs = self.counts(since)
            if done(conns, execs) or time.monotonic() > end:
                return conns, execs
            time.sleep(0.05)

    def settled_counts(self, since: dict[Path, int] | None, quiet: float = 1.0, timeout: float = 30.0) -> tuple[Counter[str], Counter[str]]:
        """counts() once the logs have not grown for `quiet` seconds (for a run whose every count is not known
        in advance): each connection's lines come after the client has gone."""
        end = time.monotonic() + timeout
        last, still = self.log_mark(), time.monotonic()
        while time.monotonic() < end and time.monotonic() - still < quiet:
            time.sleep(0.05)
            now = self.log_mark()
            if now != last:
                last, still = now, time.monotonic()
        return self.counts(since)

    # -- teardown

    def stop(self) -> None:
        self._stop.set()
        (self.hostdir / "released").touch()  # the slow hosts' sessions end within a second
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
            if p.stderr:
                p.stderr.close()
        for s in self._silent_socks:
            s.close()
        for c in self._silent_conns:
            c.close()


def sshd_available(path: str = SSHD) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK) and shutil.which("ssh-keygen") is not None
