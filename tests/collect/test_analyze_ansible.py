"""`probe-script` + real ansible-core + `analyze`, end to end over a real sshd on loopback.

A private OpenSSH sshd listens on 127.0.0.1 (an unprivileged port, a temporary host key, key
authentication for root, no ForceCommand), so Ansible's `script` module really copies the probe
to "the host" (this Linux machine) and runs it through ssh, exactly as it would on a FreeBSD
fleet. The `raw` module then serves FreeBSD probe output (rendered from the shipped recordings)
to check the FreeBSD assessments through the same Ansible JSON path, and a closed port gives an
unreachable host. Nothing leaves 127.0.0.0/8.

If /usr/sbin/sshd is missing the tests skip, unless BSDCRYPT_REQUIRE_SSHD=1 (CI): then they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import run_cli
from fleet.loopback import SSHD_LOGIN_OPTIONS

from bsdcrypt.collect.analyze import STANDALONE_TOKEN
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.pipeline import status_of
from bsdcrypt.probe import render
from bsdcrypt.recording import load

ROOT = Path(__file__).resolve().parents[2]
SSHD = "/usr/sbin/sshd"
ADDR = "127.0.0.1"
FREEBSD = [
    "freebsd-12.2-bhyve-geli-software-aesni-kldloaded",
    "freebsd-13.0-hyperv-builtin",
    "pfsense-2.4.5-celeron-j3160-not-loaded",
]


def _require() -> None:
    missing = [x for x in (SSHD,) if not os.access(x, os.X_OK)]
    missing += [x for x in ("ssh", "ssh-keygen") if shutil.which(x) is None]
    if not missing:
        return
    if os.environ.get("BSDCRYPT_REQUIRE_SSHD") == "1":
        pytest.fail(f"BSDCRYPT_REQUIRE_SSHD=1 but {', '.join(missing)} missing (apt install openssh-server)")
    pytest.skip(f"{', '.join(missing)} not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((ADDR, 0))
        return int(s.getsockname()[1])


@dataclass
class Sshd:
    work: Path
    port: int
    client_key: Path
    known_hosts: Path
    closed_port: int


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    _require()
    pytest.importorskip("ansible")
    # A short path: ssh's control sockets and sshd's paths stay well under the unix socket limit.
    work = Path(tempfile.mkdtemp(prefix="bsdc-ans-"))
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / name)],
                       check=True, stdin=subprocess.DEVNULL)
    (work / "authorized_keys").write_text((work / "client_key.pub").read_text())
    port = _free_port()
    (work / "sshd_config").write_text("\n".join([
        f"ListenAddress {ADDR}:{port}",
        f"HostKey {work / 'host_key'}",
        f"PidFile {work / 'sshd.pid'}",
        f"AuthorizedKeysFile {work / 'authorized_keys'}",
        *SSHD_LOGIN_OPTIONS,
        "Subsystem sftp internal-sftp",
        "LogLevel VERBOSE",
    ]) + "\n")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = work / "sshd.log"
    proc = subprocess.Popen([SSHD, "-D", "-f", str(work / "sshd_config"), "-E", str(log)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while "Server listening" not in (log.read_text(errors="replace") if log.exists() else ""):
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                pytest.fail(f"sshd exited with {proc.returncode}: {err[:500]}")
            if time.monotonic() > deadline:
                pytest.fail("sshd did not start listening in 20 s")
            time.sleep(0.05)
        pub = (work / "host_key.pub").read_text().split()
        known = work / "known_hosts"
        known.write_text(f"[{ADDR}]:{port} {pub[0]} {pub[1]}\n")
        yield Sshd(work, port, work / "client_key", known, _free_port())
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        if proc.stderr:
            proc.stderr.close()
        shutil.rmtree(work, ignore_errors=True)


def _inventory(s: Sshd, hosts: dict[str, dict[str, str]]) -> Path:
    common = {
        "ansible_host": ADDR,
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(s.client_key),
        "ansible_ssh_common_args": (
            f"-o UserKnownHostsFile={s.known_hosts} -o GlobalKnownHostsFile=/dev/null "
            "-o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=5"
        ),
    }
    inv = {"all": {"hosts": {name: {**common, **extra} for name, extra in hosts.items()}}}
    path = s.work / f"inventory-{len(list(s.work.glob('inventory-*')))}.json"
    path.write_text(json.dumps(inv))
    return path


def _ansible(s: Sshd, inventory: Path, *args: str) -> tuple[int, str, str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "SSH_AUTH_SOCK"))},
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",  # ad-hoc `ansible` uses the callback only with this
        "ANSIBLE_HOME": str(s.work / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(s.work / "ansible-local"),
        "ANSIBLE_REMOTE_TEMP": str(s.work / "ansible-remote"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(s.work / "cp"),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_NOCOLOR": "1",
        "LC_ALL": "C.UTF-8",  # ansible refuses to start without a UTF-8 locale (CI may have none set)
        "ANSIBLE_TIMEOUT": "10",
        "ANSIBLE_CONFIG": str(s.work / "ansible.cfg"),  # never the user's or a system one
    }
    (s.work / "ansible.cfg").write_text("[defaults]\n")
    ansible = shutil.which("ansible", path=os.path.dirname(sys.executable)) or shutil.which("ansible")
    assert ansible, "ansible-core is installed but its `ansible` command is not on PATH"
    r = subprocess.run([ansible, "all", "-i", str(inventory), *args], capture_output=True, text=True,
                       env=env, timeout=180, check=False, cwd=s.work)
    return r.returncode, r.stdout, r.stderr


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("analyze", *args)


@pytest.mark.slow
def test_script_module_runs_the_probe_over_ssh_and_analyze_matches_status(sshd: Sshd) -> None:
    probe = sshd.work / "probe.sh"
    r = run_cli("probe-script", check=True)
    probe.write_text(r.stdout)
    inv = _inventory(sshd, {"web1": {"ansible_port": str(sshd.port)},
                            "gone": {"ansible_port": str(sshd.closed_port)}})
    rc, out, err = _ansible(sshd, inv, "-m", "script", "-a", str(probe))
    assert rc in (0, 4), err  # 4: some host unreachable
    doc = json.loads(out)
    web1 = doc["plays"][0]["tasks"][0]["hosts"]["web1"]
    assert STANDALONE_TOKEN + " begin uname_s" in web1["stdout"], web1
    assert doc["plays"][0]["tasks"][0]["hosts"]["gone"].get("unreachable") is True
    collected = sshd.work / "ansible-script.json"
    collected.write_text(out)

    got = _analyze("--format", "json", str(collected))
    assert got.returncode == 3, got.stderr  # this Linux machine: unknown; the closed port: unknown
    report = json.loads(got.stdout)
    hosts = {h["fleet"]["target"]: h for h in report["hosts"]}
    assert set(hosts) == {"web1", "gone"}
    assert hosts["gone"]["findings"][0]["id"] == "collect-unreachable"
    assert hosts["gone"]["fleet"]["error_kind"] == "unreachable"

    # The same host probed directly by `bsdcrypt status`: the same assessment.
    local = json.loads(run_cli("status", "--format", "json").stdout)
    web1_status = hosts["web1"]
    assert web1_status["host"] == "web1" and web1_status["source"] == f"ansible:{collected}"
    for key in ("os", "cpu", "driver", "other_drivers", "persist", "geli", "findings", "root", "verdict"):
        assert web1_status[key] == local[key], key

    prom = _analyze("--format", "prometheus", str(collected))
    assert prom.returncode == 3
    from prometheus_client.parser import text_string_to_metric_families

    codes = {s.labels["host"]: s.value for f in text_string_to_metric_families(prom.stdout)
             if f.name == "bsdcrypt_exit_code" for s in f.samples}
    assert codes == {"web1": 3, "gone": 3}


@pytest.mark.slow
def test_raw_module_serves_freebsd_hosts_and_analyze_assesses_them(sshd: Sshd) -> None:
    hosts: dict[str, dict[str, str]] = {}
    for name in FREEBSD:
        _, evidence = load(ROOT / "fixtures" / "hosts" / f"{name}.yaml")
        out = sshd.work / f"{name}.out"
        out.write_bytes(render(evidence, STANDALONE_TOKEN))
        hosts[name] = {"ansible_port": str(sshd.port), "probe_output": str(out)}
    inv = _inventory(sshd, hosts)
    tree = sshd.work / "tree"
    rc, out, err = _ansible(sshd, inv, "-m", "raw", "-a", "cat {{ probe_output }}", "--tree", str(tree))
    assert rc == 0, err
    assert sorted(p.name for p in tree.iterdir()) == sorted(FREEBSD)
    collected = sshd.work / "ansible-raw.json"
    collected.write_text(out)

    got = _analyze("--format", "json", str(collected))
    report = json.loads(got.stdout)
    by_name = {h["host"]: h for h in report["hosts"]}
    assert set(by_name) == set(FREEBSD)
    for name in FREEBSD:
        expected = status_of(ReplayHost.from_file(ROOT / "fixtures" / "hosts" / f"{name}.yaml")).to_dict()
        for key in ("os", "cpu", "driver", "other_drivers", "persist", "geli", "findings", "root", "verdict"):
            assert by_name[name][key] == expected[key], (name, key)
    worst = max(status_of(ReplayHost.from_file(ROOT / "fixtures" / "hosts" / f"{n}.yaml")).exit_code
                for n in FREEBSD)
    assert got.returncode == worst == 2

    table = _analyze(str(collected))
    assert table.returncode == 2
    assert "vtbd1.eli" in table.stdout and "3 hosts: 1 critical, 1 warning, 1 ok" in table.stdout

    # ansible-core's own --tree output (one JSON file per host): the same report.
    from_tree = _analyze("--format", "json", str(tree))
    assert from_tree.returncode == 2
    tree_hosts = {h["host"]: h for h in json.loads(from_tree.stdout)["hosts"]}
    for name in FREEBSD:
        assert tree_hosts[name]["source"] == f"ansible:{tree / name}"
        for key in ("os", "driver", "persist", "geli", "findings", "verdict"):
            assert tree_hosts[name][key] == by_name[name][key]
