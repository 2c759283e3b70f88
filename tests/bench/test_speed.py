"""bench/speed.py, the one `openssl speed` measurement: interleaved rounds, the old-OpenSSL fallback,
the CPU share from stderr, and which series are too noisy to trust (with their spread)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

import pytest
from bench_host import CPUTIME_FIGURE, speed_answer

from bsdcrypt.bench import speed
from bsdcrypt.bench.openssl import IA32CAP_MASK, userland
from bsdcrypt.hostapi import RunResult

FIGURE = CPUTIME_FIGURE


@dataclass
class SpeedHost:
    """Answers bench/speed.py's openssl children with the capture; `factors` scale successive figures."""

    factors: list[float] = field(default_factory=lambda: [1.0])
    full_cpu: bool = True
    commands: list[str] = field(default_factory=list)
    old_only: bool = False  # an OpenSSL without -seconds/-bytes (1.0.2, 1.1.0)
    name: str = "speedhost"
    spec: str = "speedhost"

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        self.commands.append(command)
        if self.old_only and "-seconds" in command:
            return RunResult(1, b"", b"")
        return speed_answer(command, self.factors[(len(self.commands) - 1) % len(self.factors)], self.full_cpu)


def test_rounds_interleave_the_two_settings_and_give_medians() -> None:
    host = SpeedHost()
    m = speed.run(host, "/usr/bin/openssl", "~0x200000200000000", None, rounds=2, seconds=1, ciphers=("aes-128-gcm",))
    envs = ["masked" if "OPENSSL_ia32cap='~0x200000200000000'; export" in c else
            "unset" if "unset OPENSSL_ia32cap" in c else "?" for c in host.commands]
    assert envs == ["masked", "unset", "unset", "masked"]  # round 2 in the other order
    assert all(c.endswith(" speed -seconds 1 -bytes 16384 -evp aes-128-gcm ) </dev/null") for c in host.commands)
    assert all(shlex.split(c)[:4] == ["(", "ulimit", "-c", "0"] for c in host.commands)
    c = m.ciphers[0]
    assert c.before.bytes_per_s == [FIGURE, FIGURE] and c.after.median == pytest.approx(FIGURE)
    assert c.before.cpu_share == [0.99, 0.99] and m.version == "3.0.19" and not m.noisy


def test_a_series_whose_rounds_disagree_is_named_with_its_spread() -> None:
    # before, after per round: the "after" series reads 1.0, 1.5, 0.8 of the figure
    host = SpeedHost(factors=[1.0, 1.0, 1.5, 1.0, 1.0, 0.8])
    m = speed.run(host, "openssl", None, "0x1", rounds=3, ciphers=("aes-128-gcm",))
    # round 2 runs after first: commands 1,2 = (before, after), 3,4 = (after, before), 5,6 = (before, after)
    assert m.ciphers[0].after.bytes_per_s == pytest.approx([FIGURE, 1.5 * FIGURE, 0.8 * FIGURE])
    noisy = m.noisy_series(("unset", "forced"))
    assert len(noisy) == 1 and noisy[0][:2] == ("aes-128-gcm", "forced")
    assert noisy[0][2] == "its 3 runs spread 70% of their median (over 25%)"  # (1.5 - 0.8) / 1.0
    assert m.noisy


def test_a_run_that_got_little_cpu_is_noisy_whatever_its_figure() -> None:
    """The real capture got 0.13 s of CPU in its second: the figure is CPU-time normalised, but a run
    that short is not to be trusted (a coarse CPU clock)."""
    m = speed.run(SpeedHost(full_cpu=False), "openssl", None, "0x1", rounds=3, ciphers=("aes-128-gcm",))
    why = [w for _c, _s, w in m.noisy_series()]
    assert why == ["its 3 runs spread 0% of their median (a run got only 13% of a CPU)"] * 2


def test_an_openssl_without_seconds_runs_the_old_way_in_the_rounds_given_for_it() -> None:
    host = SpeedHost(old_only=True)
    lines: list[str] = []
    m = speed.run(host, "openssl", None, "0x1", rounds=3, old=None, old_rounds=1, ciphers=("aes-128-gcm",),
                  progress=lines.append)
    assert m.old and m.rounds == 1 and not m.failures
    modern = [c for c in host.commands if "-seconds" in c]
    assert len(modern) == 1  # tried once, then every run the old way
    assert [c.split("exec ", 1)[1] for c in host.commands if "-seconds" not in c] == [
        "'openssl' speed -evp aes-128-gcm ) </dev/null"] * 2
    assert lines == ["openssl speed 1/2: aes-128-gcm (before), round 1/1: 3,119 MB/s",
                     "openssl speed 2/2: aes-128-gcm (after), round 1/1: 3,119 MB/s"]


def test_a_failed_run_is_a_failure_not_a_figure() -> None:
    class Failing(SpeedHost):
        def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
            self.commands.append(command)
            return RunResult(127, b"", b"sh: openssl: not found\n")

    m = speed.run(Failing(), "openssl", None, "0x1", rounds=1, old=False, ciphers=("aes-128-gcm",))
    assert m.failures == ["aes-128-gcm (before): exit 127", "aes-128-gcm (after): exit 127"]
    assert m.ciphers[0].gain is None and not m.noisy


def test_bench_userland_warns_naming_the_noisy_figure_and_its_spread() -> None:
    lines: list[str] = []
    # 3 ciphers x (masked, as it runs) per round; only the first run of all reads twice the figure
    factors = [2.0] + [1.0] * 17
    host = SpeedHost(factors=factors)
    u = userland(host, progress=lines.append)  # type: ignore[arg-type]
    assert u.rounds == 3 and len(lines) == 18 and lines[0].startswith("openssl speed 1/18: aes-128-gcm (AES-NI masked)")
    assert u.warnings == [
        "aes-128-gcm (AES-NI masked) is too noisy to trust: its 3 runs spread 100% of their median (over 25%); "
        "run it again at a quieter moment"
    ]
    assert sum(f"OPENSSL_ia32cap='{IA32CAP_MASK}'" in c for c in host.commands) == 9
    assert [(c.cipher, c.bytes_per_s, c.masked_bytes_per_s) for c in u.ciphers] == [
        (name, pytest.approx(FIGURE), pytest.approx(FIGURE)) for name in ("aes-128-gcm", "aes-256-gcm", "chacha20-poly1305")
    ]


def test_bench_userland_off_x86_runs_each_cipher_as_it_is_only() -> None:
    host = SpeedHost()
    u = userland(host, x86=False)  # type: ignore[arg-type]
    assert len(host.commands) == 9 and not any("OPENSSL_ia32cap=" in c for c in host.commands)
    assert all(c.masked_bytes_per_s is None for c in u.ciphers) and u.warnings == []
