"""ssh_config handling that needs no sshd: Include (as ssh_config(5) defines it), ProxyCommand tokens
and failures. Where the OpenSSH client is installed, its own reading of the same files (`ssh -G`, run
in a network namespace of its own so that nothing can be resolved or sent) is the reference."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from bsdcrypt.fleet import FleetOptions, run_fleet
from bsdcrypt.hostsfile import parse_hosts


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of its own: relative Includes of a user config are taken from ~/.ssh."""
    h = tmp_path / "home"
    (h / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    return h


def _nested_config(home: Path) -> Path:
    ssh = home / ".ssh"
    _write(ssh / "defaults.d" / "10-lab.conf", "Host lab*\n    User labuser\n")
    _write(
        ssh / "defaults.d" / "20-lab1.conf",
        "Host lab1\n    Port 2201\n    User not-this-one\n    Include nested.conf\n",
    )
    _write(ssh / "defaults.d" / "README", "this is no .conf file: not included\n")
    _write(
        ssh / "nested.conf",
        "HostKeyAlias nested-alias\n"  # inside `Host lab1` (the including block): lab1 only
        "Host lab2\n    ConnectTimeout 9\n",  # lab1 AND lab2: never
    )
    _write(
        ssh / "fw.conf",
        "Port 2202\n"  # fw1 and fw2
        "Host fw2\n    HostName 10.9.9.2\n"  # fw2 only
        "Host *\n    HostKeyAlias fw-any\n",  # fw1 and fw2, not others
    )
    _write(home / "abs" / "db.conf", "Host db1\n    Port 2401\n")
    return _write(
        ssh / "config",
        "Include defaults.d/*.conf no-such-dir/*.conf\n"
        "Host fw1 fw2\n"
        "    Include fw.conf\n"
        "    User fwadmin\n"  # the Host fw1 fw2 block goes on after the include
        f"Match originalhost db*\n    Include {home}/abs/db.conf\n    User dbadmin\n"
        "Host *\n    Port 2299\n",
    )


EXPECTED = {  # alias: (hostname, port, user, hostkeyalias, connecttimeout)
    "lab1": ("lab1", 2201, "labuser", "nested-alias", None),
    "lab2": ("lab2", 2299, "labuser", None, None),
    "fw1": ("fw1", 2202, "fwadmin", "fw-any", None),
    "fw2": ("10.9.9.2", 2202, "fwadmin", "fw-any", None),
    "db1": ("db1", 2401, "dbadmin", None, None),
    "db2": ("db2", 2299, "dbadmin", None, None),
    "other": ("other", 2299, None, None, None),
}


@pytest.mark.slow
def test_include_nested_globs_and_conditional_blocks(home: Path) -> None:
    from bsdcrypt.ssh import SSHContext

    ctx = SSHContext(str(_nested_config(home)))
    for alias, (hostname, port, user, alias_key, ct) in EXPECTED.items():
        t = ctx.target(alias)
        got = (t.hostname, t.port, t.user if user else None, t.host_key_alias, t.connect_timeout)
        assert got == (hostname, port, user, alias_key, ct), alias


def _ssh_g(config: Path, alias: str, home: Path) -> dict[str, str]:
    proc = subprocess.run(
        ["unshare", "-n", "ssh", "-G", "-F", str(config), alias],
        capture_output=True, text=True, env={**os.environ, "HOME": str(home)}, timeout=30, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ssh") is None or shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="needs the OpenSSH client and root for `unshare -n` (no name may be resolved)")
def test_include_reads_like_openssh(home: Path) -> None:
    config = _nested_config(home)
    for alias, (hostname, port, user, alias_key, ct) in EXPECTED.items():
        g = _ssh_g(config, alias, home)
        assert (g["hostname"], int(g["port"])) == (hostname, port), alias
        if user:
            assert g["user"] == user, alias
        assert g.get("hostkeyalias") == alias_key, alias
        assert g.get("connecttimeout", "none") == ("none" if ct is None else f"{ct:g}"), alias


def test_include_in_the_system_config_is_relative_to_etc_ssh(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no --ssh-config: ~/.ssh/config, then the system file (relative Includes from /etc/ssh)."""
    from bsdcrypt.ssh import SSHContext, SSHError, includes

    etc = tmp_path / "etc-ssh"
    _write(etc / "ssh_config.d" / "50-site.conf", "Host *.site\n    User siteadmin\n    Port 2500\n")
    _write(etc / "ssh_config", "Include ssh_config.d/*.conf\nHost *\n    HashKnownHosts yes\n")
    _write(home / ".ssh" / "config", "Host web.site\n    Port 2600\n")
    monkeypatch.setattr(includes, "SYSTEM_CONFIG_DIR", str(etc))
    ctx = SSHContext(ssh="")  # paramiko's reading (ssh -G reads the real /etc/ssh)
    web, app, elsewhere = ctx.target("web.site"), ctx.target("app.site"), ctx.target("x.example")
    assert (web.port, web.user, web.hash_known_hosts) == (2600, "siteadmin", True)
    assert (app.port, app.user) == (2500, "siteadmin")
    assert elsewhere.port == 22 and elsewhere.hash_known_hosts is True
    _write(etc / "ssh_config", "Include ~/x.conf\n")
    with pytest.raises(SSHError, match="bad include path"):
        SSHContext()


def test_include_loops_stop_at_openssh_depth(home: Path) -> None:
    from bsdcrypt.ssh import SSHContext, SSHError

    loop = _write(home / ".ssh" / "loop.conf", "Host a\n    Include loop.conf\n")
    with pytest.raises(SSHError, match="nested more than 16 deep") as info:
        SSHContext(str(loop))
    assert info.value.kind == "config"
    # 16 levels are fine
    for i in range(16):
        _write(home / ".ssh" / f"l{i}.conf", f"Include l{i + 1}.conf\n")
    _write(home / ".ssh" / "l16.conf", "Port 2716\n")
    assert SSHContext(str(home / ".ssh" / "l0.conf")).target("h").port == 2716


def test_proxy_command_tokens_expand_once(tmp_path: Path) -> None:
    from bsdcrypt.ssh import SSHContext, SSHError

    cfg = _write(
        tmp_path / "config",
        "Host px\n    HostName 192.0.2.9\n    User ops\n    ProxyCommand echo %n %h %p %r 100%% %%h\n"
        "Host bad\n    ProxyCommand echo %x\n",
    )
    ctx = SSHContext(str(cfg))
    assert ctx.target("px").proxy_command == "echo px 192.0.2.9 22 ops 100% %h"
    with pytest.raises(SSHError, match="unknown token %x"):
        ctx.target("bad")


# ---------------------------------------------------------------------------- failing ProxyCommands


def _proxy_run(tmp_path: Path, command: str, timeout: float = 20.0) -> tuple[str, str, float, float]:
    cfg = _write(
        tmp_path / "ssh_config",
        f"Host gw-*\n    HostName 127.0.0.1\n    ProxyCommand {command}\n"
        "Host *\n    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile none\n",
    )
    entries = parse_hosts("root@gw-1\n", "h").entries
    cpu, start = time.process_time(), time.monotonic()
    run = run_fleet(entries, FleetOptions(timeout=timeout, ssh_config=str(cfg)))
    r = run.results[0]
    return r.error_kind or "", r.error or "", time.monotonic() - start, time.process_time() - cpu


def test_a_proxy_command_that_exits_is_a_proxy_row_at_once(tmp_path: Path) -> None:
    kind, error, elapsed, _ = _proxy_run(
        tmp_path, """sh -c 'sleep 0.3; echo "connect to %h port %p: refused" >&2; echo "bastion unreachable" >&2; exit 255'""",
        timeout=300.0,
    )
    assert kind == "proxy", error
    assert "exited with status 255 before the SSH banner" in error
    assert "connect to 127.0.0.1 port 22: refused / bastion unreachable" in error
    assert elapsed < 150, elapsed  # at once, not after the 300 s timeout (the margin is for a loaded machine)


@pytest.mark.slow
def test_bin_false_as_proxy_command_is_always_the_same_row(tmp_path: Path) -> None:
    for _ in range(3):  # it used to race: a broken pipe (proxy row) or an EOF loop (timeout row)
        kind, error, _, _ = _proxy_run(tmp_path, "/bin/false")
        assert kind == "proxy" and "exited with status 1" in error and "nothing on stderr" in error, error


def test_a_proxy_commands_stderr_is_quoted_bounded(tmp_path: Path) -> None:
    kind, error, _, _ = _proxy_run(
        tmp_path, "sh -c 'i=0; while [ $i -lt 3000 ]; do echo noise line $i >&2; i=$((i+1)); done; echo last words >&2; exit 3'"
    )
    assert kind == "proxy" and "exited with status 3" in error
    said = error.split("(command:")[0]
    assert said.count("noise line") <= 2 and "last words" in said
    assert len(error) < 600


@pytest.mark.slow
def test_a_hanging_proxy_command_times_out_without_spinning(tmp_path: Path) -> None:
    kind, error, elapsed, cpu = _proxy_run(tmp_path, "sh -c 'echo dialing %h >&2; exec sleep 60'", timeout=2)
    assert kind == "timeout", error
    assert "through the ProxyCommand" in error and "dialing 127.0.0.1" in error
    assert cpu < 1.0, f"{cpu:.2f}s of CPU while waiting 2 s (a busy loop?)"


def _odd_includes(home: Path) -> Path:
    """An Include glob matching a dangling symlink, and an included file that is Latin-1, not UTF-8."""
    conf_d = home / ".ssh" / "conf.d"
    conf_d.mkdir(parents=True, exist_ok=True)
    (conf_d / "00-dangling.conf").symlink_to(home / "no-such-file.conf")
    (conf_d / "10-latin1.conf").write_bytes(
        b"# caf\xe9 du coin: not UTF-8\nHost lat\n    Port 2345\n    HostKeyAlias k\xe9y\n"
    )
    return _write(home / ".ssh" / "config", "Include conf.d/*.conf\nHost *\n    Port 2299\n")


def test_include_skips_dangling_matches_and_keeps_non_utf8_bytes(home: Path) -> None:
    from bsdcrypt.ssh import SSHContext

    ctx = SSHContext(str(_odd_includes(home)))
    lat = ctx.target("lat")
    assert lat.port == 2345
    assert lat.host_key_alias is not None
    assert lat.host_key_alias.encode("utf-8", "surrogateescape") == b"k\xe9y"
    assert ctx.target("other").port == 2299
    # a config file given by name must still exist
    from bsdcrypt.ssh import SSHError

    with pytest.raises(SSHError, match="no ssh config file"):
        SSHContext(str(home / "no-such-file.conf"))


@pytest.mark.skipif(shutil.which("ssh") is None or shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="needs the OpenSSH client and root for `unshare -n` (no name may be resolved)")
def test_odd_includes_read_like_openssh(home: Path) -> None:
    config = _odd_includes(home)
    proc = subprocess.run(
        ["unshare", "-n", "ssh", "-G", "-F", str(config), "lat"],
        capture_output=True, env={**os.environ, "HOME": str(home)}, timeout=30, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    g = dict(line.split(b" ", 1) for line in proc.stdout.splitlines() if b" " in line)
    assert (g[b"port"], g[b"hostkeyalias"]) == (b"2345", b"k\xe9y")


def test_known_hosts_keeps_non_utf8_names(tmp_path: Path) -> None:
    """A HostKeyAlias from a Latin-1 config is a name of bytes: added (plain and hashed) and found again,
    byte for byte, in a fresh read of the file."""
    from bsdcrypt.ssh import KnownHosts

    name = b"k\xe9y".decode("utf-8", "surrogateescape")
    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(32)
    for hashed in (False, True):
        path = tmp_path / f"kh-{hashed}"
        KnownHosts().add(str(path), name, "ssh-ed25519", blob, hashed)
        fresh = KnownHosts()
        fresh.load(str(path))
        assert [k.blob for k in fresh.lookup(name)] == [blob]
        if not hashed:
            assert path.read_bytes().startswith(b"k\xe9y ssh-ed25519 ")


def test_match_exec_runs_like_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """readconf.c execute_in_shell: `$SHELL -c COMMAND`, stdin and stdout on /dev/null; exit 0 matches."""
    from bsdcrypt.ssh import SSHContext

    log, stdin = tmp_path / "shell.log", tmp_path / "stdin"
    shell = tmp_path / "myshell"
    shell.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {log}\necho >> {log}\nexec /bin/sh "$@"\n')
    shell.chmod(0o755)
    monkeypatch.setenv("SHELL", str(shell))
    cfg = _write(tmp_path / "config",
                 f'Match exec "readlink /proc/self/fd/0 > {stdin}; echo noise; test %h = lab1"\n    User labuser\n')
    ctx = SSHContext(str(cfg))
    assert ctx.target("lab1").user == "labuser"
    assert ctx.target("lab2").user != "labuser"
    assert stdin.read_text().strip() == "/dev/null"
    assert log.read_text().splitlines()[0] == f"-c|readlink /proc/self/fd/0 > {stdin}; echo noise; test lab1 = lab1|"


def test_one_ssh_g_serves_the_names_a_plain_config_treats_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config of plain Host blocks: names its blocks treat alike share one `ssh -G` (but for their name),
    and every Target is the one a fresh `ssh -G` of that very name gives; a Match line turns it off."""
    from bsdcrypt.ssh import SSHContext, settings

    cfg = tmp_path / "config"
    cfg.write_text("Host fw-*\n    Port 2200\n    User admin\nHost !fw-9 fw-*\n    IdentityFile ~/.ssh/fw\n"
                   "Host db?.lab\n    ConnectTimeout 7\nHost *\n    UserKnownHostsFile ~/kh\n"
                   "    GlobalKnownHostsFile none\n")
    names = ["fw-1", "fw-2", "fw-9", "db1.lab", "db2.lab", "db10.lab", "web", "other", "FW-3"]
    calls: list[str] = []
    real = settings.ssh_g
    monkeypatch.setattr(settings, "ssh_g", lambda ssh, c, alias, *a: calls.append(alias) or real(ssh, c, alias, *a))
    shared = SSHContext(str(cfg))
    got = {n: shared.target(n) for n in names}
    assert len(calls) < len(names)  # fw-1/fw-2, db1/db2.lab, web/other/db10.lab share
    for n in names:
        assert got[n] == SSHContext(str(cfg)).target(n), n
    cfg.write_text(cfg.read_text() + "Match user nobody\n    Port 1\n")
    calls.clear()
    matching = SSHContext(str(cfg))
    for n in names:
        matching.target(n)
    assert len(calls) == len(names)
