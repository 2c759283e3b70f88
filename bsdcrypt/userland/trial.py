"""Prove a value in child processes that may die harmlessly: core dumps off, a timeout, cwd /tmp.

A CPU that really lacks AES-NI or PCLMULQDQ raises #UD on AESENC/PCLMULQDQ: the child dies with
SIGILL (shell status 132) at AES key expansion, or in GHASH for GCM (research §6.4, measured under
qemu-user). The other trials cover the code paths the vector also selects (SHA, ChaCha20-Poly1305,
the bignum/EC assembler), since a vector that claims more than the CPU has can pass an AES-only
trial and kill the service later. Each trial runs WITH the value first; only if that fails is it run
without the value, to tell "the value kills it" from "this openssl cannot do that trial".
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from bsdcrypt.hostapi import Host, sh_quote

KEY = "000102030405060708090a0b0c0d0e0f"
TIMEOUT_S = 30  # per child; the speed trials stop themselves after 1 s of alarm
SIGILL_STATUS = 128 + int(signal.SIGILL)
TIMEOUT_STATUS = 124  # timeout(1), GNU and FreeBSD alike

# (name, what it exercises, openssl arguments for 1.1.1+/3.x)
TRIALS: tuple[tuple[str, str, str], ...] = (
    ("aes", "AES-NI key schedule and CTR", f"enc -e -aes-128-ctr -K {KEY} -iv {KEY} -in /dev/null -out /dev/null"),
    ("gcm", "AES-GCM (PCLMULQDQ GHASH)", "speed -seconds 1 -bytes 16 -evp aes-128-gcm"),
    ("cbc", "AES-CBC", "speed -seconds 1 -bytes 16 -evp aes-128-cbc"),
    ("chacha", "ChaCha20-Poly1305 (SSSE3/AVX2/AVX512 paths)", "speed -seconds 1 -bytes 16 -evp chacha20-poly1305"),
    ("sha256", "SHA-256 (SHA extensions/AVX2 paths)", "speed -seconds 1 -bytes 16 -evp sha256"),
    ("sha1", "SHA-1", "speed -seconds 1 -bytes 16 -evp sha1"),
    ("rsa", "RSA-2048 (bignum: BMI2/ADX paths)", "speed -seconds 1 rsa2048"),
    ("ecdh", "ECDH P-256 (nistz256: AVX2/BMI paths)", "speed -seconds 1 ecdhp256"),
)
# 1.0.2 / 1.1.0 speed has no -seconds/-bytes: run it under timeout(1) for a few seconds, "still running"
# being a pass (it dies in its first 16-byte pass when an instruction is missing).
OLD_TRIALS: tuple[tuple[str, str, str], ...] = (
    TRIALS[0],
    ("gcm", "AES-GCM (PCLMULQDQ GHASH)", "speed -evp aes-128-gcm"),
    ("sha256", "SHA-256", "speed -evp sha256"),
)
OLD_SECONDS = 4


@dataclass(frozen=True)
class TrialResult:
    name: str
    what: str
    rc: int  # shell status with the value: 0 ok, 132 SIGILL, 124 timeout, ...
    baseline_rc: int | None = None  # without the value, run only when the first failed

    @property
    def sigill(self) -> bool:
        return self.rc == SIGILL_STATUS

    @property
    def verdict(self) -> str:
        """pass, sigill, crash (another signal), unavailable (fails without the value too), failed."""
        if self.rc == 0:
            return "pass"
        if self.sigill and self.baseline_rc != SIGILL_STATUS:
            return "sigill"
        if self.baseline_rc is not None and self.baseline_rc != 0:
            return "unavailable"
        if self.rc > 128:
            return "crash"
        return "failed"


@dataclass
class Trials:
    value: str
    results: list[TrialResult] = field(default_factory=list)
    timeout_tool: bool = True

    @property
    def passed(self) -> bool:
        """Every trial passed or was unavailable, and the AES one passed."""
        aes = next((r for r in self.results if r.name == "aes"), None)
        return aes is not None and aes.verdict == "pass" and all(
            r.verdict in ("pass", "unavailable") for r in self.results
        )

    @property
    def sigill(self) -> list[TrialResult]:
        return [r for r in self.results if r.verdict == "sigill"]


def _child(openssl: str, args: str, env: str | None, seconds: int) -> str:
    """One child in a subshell: no core file, stdin closed, its own output discarded."""
    setting = f"OPENSSL_ia32cap={sh_quote(env)}; export OPENSSL_ia32cap" if env is not None else "unset OPENSSL_ia32cap"
    return (
        f"( ulimit -c 0 2>/dev/null; cd /tmp 2>/dev/null || cd /; {setting}; "
        f"to {seconds} {sh_quote(openssl)} {args} ) </dev/null >/dev/null 2>&1"
    )


def script(openssl: str, value: str, baseline: str | None, old: bool, which: tuple[str, ...] | None = None) -> str:
    """The sh script that runs every trial with `value` (and, for a failure, with `baseline`: None =
    the variable unset) and prints `bsdcrypt-trial NAME RC BASELINE_RC` per trial."""
    trials = OLD_TRIALS if old else TRIALS
    lines = [
        "PATH=/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin; export PATH",
        "if command -v timeout >/dev/null 2>&1; then TO=1; echo 'bsdcrypt-trial-timeout yes';"
        " else TO=; echo 'bsdcrypt-trial-timeout no'; fi",
        # to SECONDS CMD...: CMD under timeout(1) when there is one (its status, 132 for SIGILL, 124 timed out)
        'to() { if [ -n "$TO" ]; then timeout "$@"; else shift; "$@"; fi; }',
    ]
    for name, _what, args in trials:
        if which is not None and name not in which:
            continue
        seconds = OLD_SECONDS if old and args.startswith("speed") else TIMEOUT_S
        with_value = _child(openssl, args, value, seconds)
        without = _child(openssl, args, baseline, seconds)
        lines.append(f"{with_value}; r=$?; b=-; if [ $r -ne 0 ]; then {without}; b=$?; fi")
        lines.append(f"echo \"bsdcrypt-trial {name} $r $b\"")
    return "\n".join(lines) + "\n"


def parse(output: str, value: str, old: bool) -> Trials:
    trials = OLD_TRIALS if old else TRIALS
    what = {name: w for name, w, _ in trials}
    out = Trials(value)
    for line in output.splitlines():
        parts = line.split()
        if parts[:1] == ["bsdcrypt-trial-timeout"]:
            out.timeout_tool = parts[1:2] == ["yes"]
        if len(parts) == 4 and parts[0] == "bsdcrypt-trial" and parts[1] in what:
            try:
                rc = int(parts[2])
                base = None if parts[3] == "-" else int(parts[3])
            except ValueError:
                continue
            if old and parts[1] != "aes":
                # a 1.0.2 speed run still going when timeout(1) stopped it is a pass
                rc = 0 if rc == TIMEOUT_STATUS else rc
                base = 0 if base == TIMEOUT_STATUS else base
            out.results.append(TrialResult(parts[1], what[parts[1]], rc, base))
    return out


def run(
    host: Host, openssl: str, value: str, baseline: str | None = None, *, old: bool = False,
    which: tuple[str, ...] | None = None,
) -> Trials:
    """Run the trials (all, or `which`) on the host, every child harmless if it dies; say how each ended."""
    text = script(openssl, value, baseline, old, which)
    per = OLD_SECONDS if old else TIMEOUT_S
    res = host.run(text, timeout=len(TRIALS) * 2 * (per + 5) + 60)
    return parse(res.stdout.decode("utf-8", "replace"), value, old)
