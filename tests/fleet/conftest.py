"""Session fixture: a real OpenSSH sshd on loopback serving fake hosts (see loopback.py).

If /usr/sbin/sshd is missing the fleet tests skip, unless BSDCRYPT_REQUIRE_SSHD=1 (CI), where
they fail.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .loopback import LoopbackFleet, healthy_address, sshd_available

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures" / "hosts"
MIN_HEALTHY = 20

# Faulty endpoints: address -> kind (closed port and silent listener are added by LoopbackFleet).
FAULTY = {
    "127.2.0.1": "slow",
    "127.2.0.2": "garbage",
    "127.2.0.3": "cut",
    "127.2.0.4": "auth-refused",
    "127.2.0.5": "wrong-key",
    "127.2.0.6": "unknown-key",
}
LINUX_ADDR = "127.2.0.7"
TIMEOUT = 3.0  # per host in the tests; the slow host sleeps far longer


def require_sshd() -> None:
    if sshd_available():
        return
    if os.environ.get("BSDCRYPT_REQUIRE_SSHD") == "1":
        pytest.fail("BSDCRYPT_REQUIRE_SSHD=1 but /usr/sbin/sshd or ssh-keygen is missing "
                    "(apt install openssh-server)")
    pytest.skip("/usr/sbin/sshd not installed")


def start_or_skip(fleet: LoopbackFleet, addr: str) -> None:
    """Start the fleet and check a login to `addr`; if none is possible, stop it and skip (fail in CI)."""
    fleet.start()
    problem = login_problem(fleet, addr)
    if problem is not None:
        fleet.stop()
        if os.environ.get("BSDCRYPT_REQUIRE_SSHD") == "1":
            pytest.fail(problem)
        pytest.skip(problem)


def login_problem(fleet: LoopbackFleet, addr: str) -> str | None:
    """Can the tests log in to the fake hosts at all? They log in as the user running them (root in CI).
    An sshd started by another user can only let that user in, and sshd refuses a locked account
    (a `!` password, as `adduser --disabled-password` gives): say so once, instead of 30 failures."""
    from bsdcrypt.ssh import SSHContext, SSHError, SSHHost

    host = SSHHost.from_spec(fleet.spec(addr), SSHContext(str(fleet.ssh_config)), timeout=20)
    try:
        host.connect()  # connect and authenticate, no exec: the tests' exec counts are untouched
        return None
    except SSHError as exc:
        time.sleep(0.3)  # let sshd write its log line
        said = [ln.strip() for log in fleet.log_files for ln in log.read_text(errors="replace").splitlines()
                if "not allowed" in ln or "Invalid user" in ln or "User " in ln][-1:]
        hint = f" (sshd: {said[0]})" if said else ""
        return f"cannot log in to the test sshd as {fleet.user!r}: {exc}{hint}"
    finally:
        host.close()


def _minimal_freebsd_recording(path: Path) -> None:
    """Only when fixtures/hosts is empty: a tiny FreeBSD 14.1 amd64 recording (uname, sysctl, kldstat)."""
    from bsdcrypt import recording
    from bsdcrypt.probe import Evidence, Step

    steps = {
        "uname_s": Step(0, b"FreeBSD\n"),
        "uname_a": Step(0, b"FreeBSD host.example 14.1-RELEASE FreeBSD 14.1-RELEASE GENERIC amd64\n"),
        "sysctl": Step(
            0,
            b"kern.ostype: FreeBSD\nkern.osrelease: 14.1-RELEASE\nkern.osreldate: 1401000\n"
            b"kern.ident: GENERIC\nhw.machine: amd64\nhw.machine_arch: amd64\n",
        ),
        "id_u": Step(0, b"0\n"),
    }
    text = recording.dump(Evidence(steps), "host.example", comment="minimal fallback for fleet tests")
    path.write_text(text)


def linux_recording(path: Path) -> Path:
    """A recording of this (Linux) machine, made by the real probe."""
    from bsdcrypt import recording
    from bsdcrypt.hosts.local import LocalHost
    from bsdcrypt.probe import gather

    if not path.exists():
        text = recording.dump(gather(LocalHost()), "linux-ci", comment="bsdcrypt probe on the CI machine")
        path.write_text(text)
    return path


def fleet_recordings(workdir: Path) -> list[Path]:
    recs = sorted(FIXTURES.glob("*.yaml"))
    if not recs:
        fallback = workdir / "freebsd-minimal.yaml"
        _minimal_freebsd_recording(fallback)
        recs = [fallback]
    return recs


@dataclass
class FleetEnv:
    fleet: LoopbackFleet
    healthy: dict[str, Path]  # address -> recording
    linux: str
    faulty: dict[str, str]

    def spec(self, addr: str) -> str:
        return self.fleet.spec(addr)


@pytest.fixture(scope="session")
def loopback_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetEnv]:
    require_sshd()
    work = tmp_path_factory.mktemp("sshd-fleet")
    recs = fleet_recordings(work)
    # the slow host holds its session until the fleet stops (600 s at most): a run that waited for it
    # would hit the tests' 120 s limit on a run, however slow or fast the machine is
    fleet = LoopbackFleet(work / "fleet", slow_seconds=600)
    healthy: dict[str, Path] = {}
    for i in range(max(MIN_HEALTHY, len(recs))):
        addr = healthy_address(i)
        healthy[addr] = recs[i % len(recs)]
        fleet.add(addr, "replay", recs[i % len(recs)])
    for addr, kind in FAULTY.items():
        fleet.add(addr, kind, recs[0])
    fleet.add(LINUX_ADDR, "replay", linux_recording(work / "linux.yaml"))
    start_or_skip(fleet, healthy_address(0))
    try:
        yield FleetEnv(fleet, healthy, LINUX_ADDR, dict(FAULTY))
    finally:
        fleet.stop()


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never use the developer's ssh-agent or keys in these tests."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
