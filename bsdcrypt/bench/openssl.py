"""`bench --userland`: userland OpenSSL's AES-GCM and ChaCha20-Poly1305 as it runs and with AES-NI
masked (bench/speed.py measures), the spread of each, and which cipher to prefer."""

from __future__ import annotations

from collections.abc import Callable

from bsdcrypt.bench import speed
from bsdcrypt.bench.model import CipherSpeed, UserlandResult
from bsdcrypt.hostapi import Host

USERLAND_CIPHERS = ("aes-128-gcm", "aes-256-gcm", "chacha20-poly1305")
IA32CAP_MASK = "~0x200000200000000"  # AES-NI (bit 57) and PCLMULQDQ (bit 33) off
ROUNDS = 3  # interleaved rounds (OpenSSL 1.1.1+: 1 s each); a median and a spread
OLD_ROUNDS = 1  # OpenSSL 1.0.2/1.1.0: each run takes its fixed 3 s per block size
SETTINGS = ("AES-NI masked", "as it runs")  # speed's "before" and "after"


def userland(
    host: Host, seconds: int = 1, x86: bool = True, *, rounds: int = ROUNDS,
    progress: Callable[[str], None] | None = None,
) -> UserlandResult:
    """`openssl speed -evp` for AES-GCM and ChaCha20-Poly1305, also with AES-NI masked (x86); a
    warning for each figure too noisy to trust, and for each run that failed."""
    m = speed.run(
        host, "openssl", IA32CAP_MASK, None, rounds=rounds, seconds=seconds, old=None, ciphers=USERLAND_CIPHERS,
        with_before=x86, old_rounds=OLD_ROUNDS, progress=progress, names=SETTINGS,
    )
    speeds = [CipherSpeed(c.cipher, c.after.median, c.before.median if x86 else None) for c in m.ciphers]
    prefer, advice = userland_advice(speeds)
    warnings = [
        f"{cipher} ({setting}) is too noisy to trust: {why}; run it again at a quieter moment"
        for cipher, setting, why in m.noisy_series(SETTINGS)
    ]
    warnings += [f"openssl speed gave no figure for {f}" for f in m.failures]
    return UserlandResult(m.version, speeds, prefer, advice, rounds=m.rounds, warnings=warnings)


def userland_advice(speeds: list[CipherSpeed]) -> tuple[str | None, str]:
    by = {s.cipher: s for s in speeds}
    aes = by.get("aes-128-gcm")
    cha = by.get("chacha20-poly1305")
    if aes is None or cha is None or not aes.bytes_per_s or not cha.bytes_per_s:
        return None, "openssl speed gave no usable figures; no cipher advice"
    ratio = aes.bytes_per_s / cha.bytes_per_s
    masked_note = ""
    if aes.masked_bytes_per_s:
        gain = aes.bytes_per_s / aes.masked_bytes_per_s
        if gain < 1.5:
            masked_note = (
                f" Masking AES-NI changes AES-128-GCM only {gain:.1f}x: OpenSSL is not using AES-NI here "
                "(CPU without it, or a VM that hides it)."
            )
        else:
            masked_note = f" AES-NI makes AES-128-GCM {gain:.1f}x faster than without it."
    if ratio >= 1.0:
        return "AES-GCM", (
            f"Prefer AES-GCM for TLS/SSH on this host: AES-128-GCM runs {ratio:.1f}x ChaCha20-Poly1305."
            + masked_note
        )
    return "ChaCha20-Poly1305", (
        f"Prefer ChaCha20-Poly1305 for TLS/SSH on this host: it runs {1 / ratio:.1f}x AES-128-GCM, "
        "as on CPUs/VMs without usable AES-NI." + masked_note
    )
