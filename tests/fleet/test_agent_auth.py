"""Public-key login with a real ssh-agent (issue 13): keys that load here are signed here, agent-only keys
still log in through the agent. `ssh-agent -d` logs each request it serves, so the tests see whether
the agent was asked at all (a connection), for its keys (message 11) or for a signature."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import TIMEOUT, FleetEnv
from .test_fleet_sshd import bsdcrypt

pytestmark = pytest.mark.skipif(shutil.which("ssh-agent") is None, reason="needs ssh-agent")


class Agent:
    def __init__(self, sock: Path, log: Path) -> None:
        self.sock = sock
        self.log = log

    def requests(self) -> str:
        return self.log.read_text(errors="replace")

    def connections(self) -> int:
        return self.requests().count("new_socket: type = CONNECTION")

    def signatures(self) -> int:
        return self.requests().count("process_sign_request2: entering")


@pytest.fixture
def agent(tmp_path: Path, loopback_fleet: FleetEnv) -> Iterator[Agent]:
    sock, log = tmp_path / "agent.sock", tmp_path / "agent.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(["ssh-agent", "-d", "-a", str(sock)], stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # "SSH_AUTH_SOCK=...; export ..." once it listens
        assert b"SSH_AUTH_SOCK" in first, first
        subprocess.run(["ssh-add", str(loopback_fleet.fleet.client_key)], env={"SSH_AUTH_SOCK": str(sock)},
                       check=True, capture_output=True, timeout=60)
        yield Agent(sock, log)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()


def _config(env: FleetEnv, tmp_path: Path, identity: Path, identities_only: bool) -> Path:
    fl = env.fleet
    path = tmp_path / "ssh_config"
    path.write_text(
        "Host *\n"
        f"    User {fl.user}\n"
        f"    IdentityFile {identity}\n"
        f"    IdentitiesOnly {'yes' if identities_only else 'no'}\n"
        f"    UserKnownHostsFile {fl.known_hosts}\n"
        "    GlobalKnownHostsFile none\n"
    )
    return path


def _audit(env: FleetEnv, tmp_path: Path, config: Path, agent: Agent) -> dict[str, object]:
    addr = next(iter(env.healthy))
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(env.spec(addr) + "\n")
    out = tmp_path / "report.json"
    proc = bsdcrypt("fleet-audit", str(hosts), "-F", str(config), "--timeout", str(TIMEOUT), "-f", "json",
                    "-o", str(out), env={"SSH_AUTH_SOCK": str(agent.sock)})
    assert out.exists(), proc.stderr
    row = json.loads(out.read_text())["hosts"][0]
    fleet = row["fleet"]
    assert isinstance(fleet, dict)
    return fleet


@pytest.mark.slow
def test_a_loadable_identity_file_is_signed_here_and_the_agent_is_not_asked(
    loopback_fleet: FleetEnv, tmp_path: Path, agent: Agent
) -> None:
    before = agent.connections()
    row = _audit(loopback_fleet, tmp_path, _config(loopback_fleet, tmp_path, loopback_fleet.fleet.client_key,
                                                   identities_only=True), agent)
    assert row["error"] is None, row
    assert agent.connections() == before  # IdentitiesOnly: the agent could offer nothing else
    assert agent.signatures() == 0


def test_without_identities_only_the_agent_lists_keys_but_a_loadable_twin_is_signed_here(
    loopback_fleet: FleetEnv, tmp_path: Path, agent: Agent
) -> None:
    before = agent.connections()
    row = _audit(loopback_fleet, tmp_path, _config(loopback_fleet, tmp_path, loopback_fleet.fleet.client_key,
                                                   identities_only=False), agent)
    assert row["error"] is None, row
    assert agent.connections() > before
    assert agent.signatures() == 0


def test_an_agent_only_key_still_logs_in_through_the_agent(
    loopback_fleet: FleetEnv, tmp_path: Path, agent: Agent
) -> None:
    """The IdentityFile is passphrase-protected (it cannot load here); its key is in the agent."""
    key = loopback_fleet.fleet.client_key
    locked = tmp_path / "locked_ed25519"
    shutil.copyfile(key, locked)
    locked.chmod(0o600)
    shutil.copyfile(f"{key}.pub", f"{locked}.pub")
    subprocess.run(["ssh-keygen", "-q", "-p", "-P", "", "-N", "a passphrase", "-f", str(locked)], check=True,
                   capture_output=True, timeout=60)
    row = _audit(loopback_fleet, tmp_path, _config(loopback_fleet, tmp_path, locked, identities_only=True), agent)
    assert row["error"] is None, row
    assert agent.signatures() == 1
