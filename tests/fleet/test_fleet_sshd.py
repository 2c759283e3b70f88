"""fleet-audit against a real OpenSSH sshd on 127.0.0.0/8 (see conftest.py / loopback.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli

from .conftest import TIMEOUT, FleetEnv

REPO = Path(__file__).resolve().parents[2]
EXPECTED_KIND = {
    "slow": "timeout",
    "garbage": "garbage",
    "cut": "cut-off",
    "auth-refused": "auth",
    "wrong-key": "hostkey-changed",
    "unknown-key": "hostkey-unknown",
}
VOLATILE = ("host", "source", "fleet")


Proc = subprocess.CompletedProcess[str]


def bsdcrypt(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> Proc:
    return run_cli(*args, input=stdin, env=env, unset=("SSH_AUTH_SOCK",))  # type: ignore[no-any-return]


def replay_status(recording: Path) -> dict[str, Any]:
    """What `bsdcrypt status --host replay:REC --format json` says: the fleet must say the same."""
    from bsdcrypt.hosts.replay import ReplayHost
    from bsdcrypt.pipeline import status_of

    data = status_of(ReplayHost.from_file(recording)).to_dict()
    return {k: v for k, v in data.items() if k not in VOLATILE}


def strip(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in VOLATILE}


def hosts_file(env: FleetEnv, tmp_path: Path, extra: list[str] | None = None) -> tuple[Path, dict[str, str]]:
    """All fake hosts, the closed port and the silent listener; returns (file, spec -> what it is)."""
    fl = env.fleet
    what: dict[str, str] = {}
    for addr in env.healthy:
        what[env.spec(addr)] = "healthy"
    for addr, kind in env.faulty.items():
        what[env.spec(addr)] = kind
    what[env.spec(env.linux)] = "linux"
    what[env.spec(fl.closed_addr)] = "closed"
    what[env.spec(fl.silent_addr)] = "silent"
    path = tmp_path / "hosts.txt"
    lines = ["# loopback fleet", *what, "", *(extra or [])]
    path.write_text("\n".join(lines) + "\n")
    return path, what


@pytest.fixture(scope="module")
def full_run(loopback_fleet: FleetEnv, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = loopback_fleet
    tmp = tmp_path_factory.mktemp("full-run")
    path, what = hosts_file(env, tmp)
    mark = env.fleet.log_mark()
    out = tmp / "report.json"
    proc = bsdcrypt(
        "fleet-audit", str(path), "--ssh-config", str(env.fleet.ssh_config), "--timeout", str(TIMEOUT),
        "--parallel", "64", "--format", "json", "-o", str(out),
    )
    conns, execs = env.fleet.settled_counts(mark)  # sshd writes the last lines after the client has gone
    return {
        "proc": proc, "what": what, "doc": json.loads(out.read_text()),
        "conns": conns, "execs": execs, "out": out, "ptys": env.fleet.ptys(mark),
    }


def by_target(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["fleet"]["target"]: h for h in doc["hosts"]}


@pytest.mark.slow
def test_every_healthy_host_matches_status_on_its_recording(
    full_run: dict[str, Any], loopback_fleet: FleetEnv
) -> None:
    hosts = by_target(full_run["doc"])
    assert len(hosts) == len(full_run["what"])
    expected_cache: dict[Path, dict[str, Any]] = {}
    for addr, rec in loopback_fleet.healthy.items():
        row = hosts[loopback_fleet.spec(addr)]
        assert row["fleet"]["error"] is None, row["fleet"]
        if rec not in expected_cache:
            expected_cache[rec] = replay_status(rec)
        assert strip(row) == expected_cache[rec], f"{addr} answered from {rec.name}"
        assert row["host"] == addr
        assert row["schema"] == 1 and row["verdict"] in ("ok", "warning", "critical", "unknown")


@pytest.mark.slow
def test_every_faulty_host_is_a_row_with_its_reason(
    full_run: dict[str, Any], loopback_fleet: FleetEnv
) -> None:
    hosts = by_target(full_run["doc"])
    fl = loopback_fleet.fleet
    for addr, kind in loopback_fleet.faulty.items():
        row = hosts[loopback_fleet.spec(addr)]
        assert row["verdict"] == "unknown"
        assert row["fleet"]["error_kind"] == EXPECTED_KIND[kind], (addr, row["fleet"])
        assert row["findings"][0]["id"] == f"fleet-{EXPECTED_KIND[kind]}"
        assert row["findings"][0]["remedy"]
    closed = hosts[loopback_fleet.spec(fl.closed_addr)]["fleet"]
    assert closed["error_kind"] == "refused" and "connection refused" in closed["error"]
    silent = hosts[loopback_fleet.spec(fl.silent_addr)]["fleet"]
    assert silent["error_kind"] == "no-ssh" and "SSH banner" in silent["error"]
    slow = hosts[loopback_fleet.spec("127.2.0.1")]["fleet"]
    assert f"timed out after {TIMEOUT:g}s" in slow["error"]
    assert "during reading the output" in slow["error"]  # the watchdog's abort names the phase it cut short
    changed = hosts[loopback_fleet.spec("127.2.0.5")]["fleet"]["error"]
    assert "HOST KEY CHANGED" in changed and "SHA256:" in changed
    unknown = hosts[loopback_fleet.spec("127.2.0.6")]["fleet"]["error"]
    assert "--accept-new" in unknown and "SHA256:" in unknown
    fl = loopback_fleet.fleet
    # a command that works as typed: the same -F, and -p/user@ as the hosts file line had them
    assert f"add it: `ssh -F {fl.ssh_config} -p {fl.port} {fl.user}@127.2.0.6` once, or rerun" in unknown, unknown
    assert "cut off" in hosts[loopback_fleet.spec("127.2.0.3")]["fleet"]["error"]


def test_linux_host_reported_as_linux(full_run: dict[str, Any], loopback_fleet: FleetEnv) -> None:
    row = by_target(full_run["doc"])[loopback_fleet.spec(loopback_fleet.linux)]
    assert row["fleet"]["error"] is None
    assert row["os"]["name"] == "Linux"
    cpuinfo = Path("/proc/cpuinfo").read_text()
    flags = next(line for line in cpuinfo.splitlines() if line.startswith(("flags", "Features")))
    assert row["cpu"]["aesni"] == ("aes" in flags.split(":", 1)[1].split())
    assert row["driver"]["name"] == "aesni_intel"
    want = "loaded" if Path("/sys/module/aesni_intel").is_dir() else "not-loaded"
    assert row["driver"]["state"] == want


def test_one_connection_and_one_exec_per_host(full_run: dict[str, Any], loopback_fleet: FleetEnv) -> None:
    conns, execs = full_run["conns"], full_run["execs"]
    answering = [*loopback_fleet.healthy, loopback_fleet.linux, "127.2.0.1", "127.2.0.2", "127.2.0.3"]
    for addr in answering:
        assert (conns[addr], execs[addr]) == (1, 1), addr
    for addr in ("127.2.0.4", "127.2.0.5", "127.2.0.6"):  # refused before any exec
        assert (conns[addr], execs[addr]) == (1, 0), addr
    assert sum(execs.values()) > 20 and not full_run["ptys"], full_run["ptys"]  # no exec had a pty


def test_the_pty_check_sees_a_pty(loopback_fleet: FleetEnv) -> None:
    """The control for the check above: a session that does request a pty shows up in fleet.ptys()."""
    if os.geteuid() != 0:
        pytest.skip("an sshd not started by root cannot hand out a pty (chown to group tty fails)")
    from bsdcrypt.ssh import SSHContext, SSHHost

    fl = loopback_fleet.fleet
    addr = list(loopback_fleet.healthy)[5]
    mark = fl.log_mark()
    host = SSHHost.from_spec(loopback_fleet.spec(addr), SSHContext(str(fl.ssh_config)), timeout=30)
    try:
        chan = host.connect().open_session(timeout=30)
        chan.get_pty()
        chan.exec_command("/bin/sh -s")
        chan.sendall(b"T=x\n\x04")  # on a pty, end of input is ^D
        deadline = time.monotonic() + 20
        while not fl.ptys(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        host.close()
    assert fl.ptys(mark) == {addr: 1}


def test_wall_time_bounded_and_exit_status_is_the_worst(full_run: dict[str, Any]) -> None:
    proc = full_run["proc"]
    # a critical host (GELI stuck on software) outranks the unreachable `unknown` ones
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""  # -o: the report went to the file
    # bounded by the timeout, not by the slow host: it answers only once the fleet stops, so a run that
    # waited for it would never have returned (bsdcrypt() gives up after 120 s and fails the fixture)
    doc = full_run["doc"]
    assert doc["fleet"]["hosts"] == len(full_run["what"])
    assert doc["fleet"]["verdict"] == "critical"
    assert doc["fleet"]["totals"]["unknown"] > 0
    assert sum(doc["fleet"]["totals"].values()) == len(full_run["what"])


@pytest.mark.slow
def test_table_csv_yaml(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    env = loopback_fleet
    addrs = list(env.healthy)[:6]
    specs = [env.spec(a) for a in addrs] + [env.spec(env.fleet.closed_addr)]
    path = tmp_path / "h.txt"
    path.write_text("\n".join(specs + [specs[0]]) + "\n")
    base = ["fleet-audit", str(path), "-F", str(env.fleet.ssh_config), "--timeout", str(TIMEOUT)]
    table = bsdcrypt(*base)
    from bsdcrypt.hosts.replay import ReplayHost
    from bsdcrypt.pipeline import status_of

    critical = any(status_of(ReplayHost.from_file(env.healthy[a])).verdict == "critical" for a in addrs)
    assert table.returncode == (2 if critical else 3)  # critical outranks the closed port's unknown
    assert "listed more than once" in table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:2] == ["host", "OS"]
    body = lines[2: 2 + len(specs)]
    order = {"CRITICAL": 0, "WARNING": 1, "UNKNOWN": 2, "OK": 3}
    ranks = [min(order[w] for w in order if f" {w} " in f" {ln} ") for ln in body]
    assert ranks == sorted(ranks), body
    assert f"{len(specs)} hosts:" in table.stdout
    assert "refused" in table.stdout

    csv_run = bsdcrypt(*base, "--format", "csv", "--quiet")
    assert csv_run.stderr == ""
    rows = list(csv.DictReader(io.StringIO(csv_run.stdout)))
    assert {r["target"] for r in rows} == set(specs)
    assert next(r for r in rows if r["error_kind"] == "refused")["verdict"] == "unknown"

    yaml_run = bsdcrypt(*base, "--format", "yaml", "-q")
    doc = yaml.safe_load(yaml_run.stdout)
    assert doc["fleet"]["hosts"] == len(specs)
    assert doc["fleet"]["duplicates"] and "listed more than once" in doc["fleet"]["duplicates"][0]


@pytest.mark.slow
def test_accept_new_adds_unknown_key_but_never_a_changed_one(
    loopback_fleet: FleetEnv, tmp_path: Path
) -> None:
    fl = loopback_fleet.fleet
    kh = tmp_path / "known_hosts"
    shutil.copy(fl.known_hosts, kh)
    cfg = tmp_path / "ssh_config"
    cfg.write_text(fl.ssh_config.read_text().replace(str(fl.known_hosts), str(kh)))
    unknown, changed = loopback_fleet.spec("127.2.0.6"), loopback_fleet.spec("127.2.0.5")
    hosts = tmp_path / "h.txt"
    hosts.write_text(f"{unknown}\n{changed}\n")
    run = bsdcrypt("fleet-audit", str(hosts), "-F", str(cfg), "--accept-new", "-f", "json", "-q")
    rows = by_target(json.loads(run.stdout))
    assert rows[unknown]["fleet"]["error"] is None
    assert rows[changed]["fleet"]["error_kind"] == "hostkey-changed"
    added = [ln for ln in kh.read_text().splitlines() if ln.startswith(f"[127.2.0.6]:{fl.port} ")]
    assert len(added) == 1
    # now known: strict mode passes
    again = bsdcrypt("fleet-audit", str(hosts), "-F", str(cfg), "-f", "json", "-q")
    assert by_target(json.loads(again.stdout))[unknown]["fleet"]["error"] is None


@pytest.mark.slow
def test_status_over_ssh_equals_status_on_the_recording(loopback_fleet: FleetEnv) -> None:
    addr, rec = next(iter(loopback_fleet.healthy.items()))
    run = bsdcrypt(
        "status", "--host", loopback_fleet.spec(addr), "--format", "json",
        env={"BSDCRYPT_SSH_CONFIG": str(loopback_fleet.fleet.ssh_config)},
    )
    assert run.stderr == ""
    assert strip(json.loads(run.stdout)) == replay_status(rec)


@pytest.mark.slow
def test_proxyjump_reaches_the_target_through_the_jump_host(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    fl = loopback_fleet.fleet
    jump, (target, rec) = list(loopback_fleet.healthy)[1], list(loopback_fleet.healthy.items())[2]
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host behind-the-jump\n    HostName {target}\n    Port {fl.port}\n"
        f"    ProxyJump {fl.user}@{jump}:{fl.port}\n\n"
        + fl.ssh_config.read_text()
    )
    hosts = tmp_path / "h.txt"
    hosts.write_text("behind-the-jump\n")
    mark = fl.log_mark()
    run = bsdcrypt("fleet-audit", str(hosts), "-F", str(cfg), "-f", "json", "-q")
    row = json.loads(run.stdout)["hosts"][0]
    assert row["fleet"]["error"] is None, row["fleet"]
    assert strip(row) == replay_status(rec)
    conns, execs = fl.counts_when(mark, lambda c, e: c[jump] >= 1 and c[target] >= 1 and e[target] >= 1)
    assert (conns[jump], execs[jump]) == (1, 0)
    assert (conns[target], execs[target]) == (1, 1)


@pytest.mark.slow
def test_replay_entries_and_hosts_from_stdin(loopback_fleet: FleetEnv) -> None:
    rec = next(iter(loopback_fleet.healthy.values()))
    run = bsdcrypt("fleet-audit", "-", "-f", "json", "-q", stdin=f"replay:{rec}\nreplay:no-such-recording\n")
    rows = json.loads(run.stdout)["hosts"]
    ok = next(r for r in rows if r["fleet"]["error"] is None)
    assert strip(ok) == replay_status(rec)
    bad = next(r for r in rows if r["fleet"]["error"] is not None)
    assert bad["fleet"]["error_kind"] == "recording"


@pytest.mark.slow
def test_bad_hosts_file_is_one_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "h.txt"
    path.write_text("ok.example\nnot a host\n")
    run = bsdcrypt("fleet-audit", str(path))
    assert run.returncode == 3
    assert f"{path}:2:" in run.stderr and "Traceback" not in run.stderr


def test_an_abort_names_the_phase_it_cut_short(loopback_fleet: FleetEnv) -> None:
    """The watchdog's abort() shuts the socket down: the read in progress ends with EOF, and the timeout
    must still name that phase (not the next one, waiting for the exit status)."""
    import threading

    from bsdcrypt.probe import PROBE_MAGIC
    from bsdcrypt.ssh import SSHContext, SSHError, SSHHost

    ctx = SSHContext(str(loopback_fleet.fleet.ssh_config))
    host = SSHHost.from_spec(loopback_fleet.spec("127.2.0.1"), ctx, timeout=60)

    def abort_when_reading() -> None:
        end = time.monotonic() + 50
        while host.phase != "reading the output" and time.monotonic() < end:
            time.sleep(0.02)
        host.abort()

    watchdog = threading.Thread(target=abort_when_reading, daemon=True)
    watchdog.start()
    with pytest.raises(SSHError) as info:
        host.run(f"echo {PROBE_MAGIC}; T=x")
    host.close()
    watchdog.join(5)
    assert info.value.kind == "timeout"
    assert "during reading the output" in str(info.value), str(info.value)


@pytest.mark.slow
def test_proxy_command_ssh_w_through_a_jump_host(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    """A real `ssh -W %h:%p` ProxyCommand (OpenSSH client, loopback only): a healthy host is audited through
    it; to a closed port the command fails and the row says so with its exit status and stderr."""
    if shutil.which("ssh") is None:
        pytest.skip("the OpenSSH client is not installed")
    fl = loopback_fleet.fleet
    jump, (target, rec) = list(loopback_fleet.healthy)[3], list(loopback_fleet.healthy.items())[4]
    proxy = f"ssh -F {fl.ssh_config} -o BatchMode=yes -p {fl.port} -W %h:%p {fl.user}@{jump}"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host via-w\n    HostName {target}\n    Port {fl.port}\n    ProxyCommand {proxy}\n"
        f"Host via-w-closed\n    HostName {fl.closed_addr}\n    Port {fl.port}\n    ProxyCommand {proxy}\n\n"
        + fl.ssh_config.read_text()
    )
    hosts = tmp_path / "h.txt"
    hosts.write_text("via-w\nvia-w-closed\n")
    mark = fl.log_mark()
    run = bsdcrypt("fleet-audit", str(hosts), "-F", str(cfg), "-f", "json", "-q", "-t", "30")
    rows = by_target(json.loads(run.stdout))
    assert rows["via-w"]["fleet"]["error"] is None, rows["via-w"]["fleet"]
    assert strip(rows["via-w"]) == replay_status(rec)
    closed = rows["via-w-closed"]["fleet"]
    assert closed["error_kind"] == "proxy", closed
    assert "exited with status 255 before the SSH banner" in closed["error"]
    assert "Connection refused" in closed["error"] and "stdio forwarding failed" in closed["error"]
    conns, execs = fl.counts_when(mark, lambda c, e: c[jump] >= 2 and c[target] >= 1 and e[target] >= 1)
    assert (conns[jump], execs[jump]) == (2, 0)
    assert (conns[target], execs[target]) == (1, 1)


@pytest.mark.slow
def test_output_into_a_missing_folder_fails_before_the_audit(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    fl = loopback_fleet.fleet
    hosts = tmp_path / "h.txt"
    hosts.write_text(f"{loopback_fleet.spec(next(iter(loopback_fleet.healthy)))}\n")
    mark = fl.log_mark()
    for out, why in ((tmp_path / "no-such-dir" / "r.json", "there is no folder"), (tmp_path, "it is a folder")):
        run = bsdcrypt("fleet-audit", str(hosts), "-F", str(fl.ssh_config), "-f", "json", "-o", str(out))
        assert run.returncode == 3
        assert run.stderr.count("\n") == 1 and why in run.stderr and "Traceback" not in run.stderr
    time.sleep(0.3)
    assert sum(fl.counts(mark)[0].values()) == 0  # no host was contacted


def _ssh(cfg: Path, alias: str, strict: str) -> Proc:
    """The real OpenSSH client running the probe's exec on a fake host (numeric HostName: nothing resolved)."""
    return subprocess.run(
        ["ssh", "-F", str(cfg), "-o", "BatchMode=yes", "-o", f"StrictHostKeyChecking={strict}", alias, "/bin/sh -s"],
        input="T=x\n", capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"},
    )


@pytest.mark.slow
def test_host_key_alias_is_read_and_written_as_ssh_does(loopback_fleet: FleetEnv, tmp_path: Path) -> None:
    """HostKeyAlias on a port other than 22: known_hosts has the alias as written, no [alias]:port (what
    ssh reads and writes). bsdcrypt --accept-new writes what ssh then accepts strictly, and the other way."""
    if shutil.which("ssh") is None:
        pytest.skip("the OpenSSH client is not installed")
    fl = loopback_fleet.fleet
    a, b = list(loopback_fleet.healthy)[8:10]
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host fw-a\n    HostName {a}\n    Port {fl.port}\n    HostKeyAlias fwkey-a\n"
        f"Host fw-b\n    HostName {b}\n    Port {fl.port}\n    HostKeyAlias fwkey-b\n\n"
        + fl.ssh_config.read_text().replace(str(fl.known_hosts), str(kh))
    )
    hosts = tmp_path / "h.txt"
    hosts.write_text("fw-a\n")
    strict = bsdcrypt("fleet-audit", str(hosts), "-F", str(cfg), "-f", "json", "-q")
    row = json.loads(strict.stdout)["hosts"][0]["fleet"]
    assert row["error_kind"] == "hostkey-unknown" and "host key of fwkey-a is not in" in row["error"], row
    assert f"`ssh -F {cfg} fw-a` once" in row["error"]  # ssh applies the alias's HostKeyAlias itself
    added = bsdcrypt("fleet-audit", str(hosts), "-F", str(cfg), "--accept-new", "-f", "json", "-q")
    assert json.loads(added.stdout)["hosts"][0]["fleet"]["error"] is None, added.stdout
    assert [ln.split()[0] for ln in kh.read_text().splitlines()] == ["fwkey-a"]
    ssh = _ssh(cfg, "fw-a", "yes")
    assert ssh.returncode == 0, ssh.stderr
    ssh = _ssh(cfg, "fw-b", "accept-new")
    assert ssh.returncode == 0 and "Permanently added 'fwkey-b'" in ssh.stderr, ssh.stderr
    hosts.write_text("fw-b\n")
    again = bsdcrypt("fleet-audit", str(hosts), "-F", str(cfg), "-f", "json", "-q")
    assert json.loads(again.stdout)["hosts"][0]["fleet"]["error"] is None, again.stdout
