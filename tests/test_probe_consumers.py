"""The probe's consumer steps (issue 27) run by the real shells against stand-in zfs/setkey commands
that print the real outputs of fixtures/parsers: what reaches the recording, and what never does
(setkey -D prints addresses, SPIs and the keys in hex: the probe keeps only the algorithm names)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bsdcrypt import probe
from bsdcrypt.parsers.ifgroup import parse_groups
from bsdcrypt.parsers.setkey import parse_setkey_dump
from bsdcrypt.parsers.zfs import parse_zfs_get

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "parsers"
SHELLS = [s for s in (["sh"], ["busybox", "sh"]) if shutil.which(s[0])]


def _fake(tmp: Path, name: str, fixture: str, rc: int = 0) -> None:
    body = (FIX / fixture).read_text().split("# ---\n", 1)[1]
    out = tmp / f"{name}.out"
    out.write_text("\n".join(line for line in body.splitlines() if not line.startswith("[root@")) + "\n")
    script = tmp / name
    script.write_text(f"#!/bin/sh\ncat '{out}'\nexit {rc}\n")
    script.chmod(0o755)


def _run(shell: list[str], script: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{tmp}:/usr/bin:/bin")
    return subprocess.run([*shell, "-c", script], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("shell", SHELLS, ids=" ".join)
def test_setkey_step_keeps_algorithm_names_only(shell: list[str], tmp_path: Path) -> None:
    _fake(tmp_path, "setkey", "setkey/bsdrp-ipsec-lab-aes-gcm-16-static.txt")
    r = _run(shell, probe.SETKEY_SCRIPT, tmp_path)
    assert r.returncode == 0
    for secret in ("31323334", "2001:db8", "10.0.23.2", "spi=", "0x00001003"):
        assert secret not in r.stdout
    dump = parse_setkey_dump(r.stdout)
    assert dump.readable and [sa.encryption for sa in dump.sas] == ["aes-gcm-16"] * 4


@pytest.mark.parametrize("shell", SHELLS, ids=" ".join)
def test_setkey_step_without_root_says_so_with_setkeys_status(shell: list[str], tmp_path: Path) -> None:
    _fake(tmp_path, "setkey", "setkey/derived-not-root.txt", rc=1)
    r = _run(shell, probe.SETKEY_SCRIPT, tmp_path)
    assert r.returncode == 1 and r.stdout == "pfkey_open: Operation not permitted\n"


@pytest.mark.parametrize("shell", SHELLS, ids=" ".join)
def test_zfs_step_keeps_encrypted_datasets_only(shell: list[str], tmp_path: Path) -> None:
    _fake(tmp_path, "zfs", "zfs/derived-zfs-get-H-probe.txt")
    r = _run(shell, probe.ZFS_CRYPTO_SCRIPT, tmp_path)
    assert r.returncode == 0
    assert [d.name for d in parse_zfs_get(r.stdout)] == ["zroot/enc", "zroot/enc/home", "tank/vol0", "tank/odd"]


@pytest.mark.parametrize("shell", SHELLS, ids=" ".join)
def test_missing_commands_exit_127(shell: list[str], tmp_path: Path) -> None:
    if shutil.which("zfs", path="/usr/bin:/bin") or shutil.which("setkey", path="/usr/bin:/bin"):
        pytest.skip("this machine has zfs or setkey on /usr/bin:/bin")
    for script in (probe.ZFS_CRYPTO_SCRIPT, probe.SETKEY_SCRIPT):
        assert _run(shell, script, tmp_path).returncode == 127


@pytest.mark.parametrize("shell", SHELLS, ids=" ".join)
def test_setkey_step_reads_the_real_vti_capture(shell: list[str], tmp_path: Path) -> None:
    _fake(tmp_path, "setkey", "setkey/bsdrp-vpn-lab-vti-aes-gcm-16-tunnel-reqid.txt")
    r = _run(shell, probe.SETKEY_SCRIPT, tmp_path)
    assert r.returncode == 0 and "31323334" not in r.stdout and "reqid" not in r.stdout
    dump = parse_setkey_dump(r.stdout)
    assert [(sa.mode, sa.encryption, sa.state) for sa in dump.sas] == [("tunnel", "aes-gcm-16", "mature")] * 2


@pytest.mark.parametrize("shell", SHELLS, ids=" ".join)
def test_tunnel_groups_step_lists_openvpn_wg_tun_and_tap(shell: list[str], tmp_path: Path) -> None:
    # a stand-in ifconfig answering -g GROUP like a pfSense box with one tun-based OpenVPN server (ovpns1,
    # in tun and openvpn), one DCO client (ovpnc2, openvpn only) and a WireGuard tunnel
    members = {"openvpn": "ovpns1 ovpnc2", "wg": "wg0", "tun": "ovpns1", "tap": ""}
    cases = "".join(f'  {g}) for i in {m}; do echo "$i"; done;;\n' for g, m in members.items())
    script = tmp_path / "ifconfig"
    script.write_text(f'#!/bin/sh\n[ "$1" = -g ] || exit 1\ncase "$2" in\n{cases}esac\n')
    script.chmod(0o755)
    r = _run(shell, probe.TUNNEL_GROUPS_SCRIPT, tmp_path)
    assert r.returncode == 0
    assert parse_groups(r.stdout) == {"openvpn": ["ovpns1", "ovpnc2"], "wg": ["wg0"], "tun": ["ovpns1"], "tap": []}
