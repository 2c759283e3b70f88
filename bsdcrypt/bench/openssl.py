"""Userland crypto: `openssl speed` for AES-GCM and ChaCha20-Poly1305, and which to prefer."""

from __future__ import annotations

import shlex

from bsdcrypt.bench.model import CipherSpeed, UserlandResult
from bsdcrypt.hostapi import Host
from bsdcrypt.parsers import openssl_speed

USERLAND_CIPHERS = ("aes-128-gcm", "aes-256-gcm", "chacha20-poly1305")
IA32CAP_MASK = "~0x200000200000000"  # AES-NI (bit 57) and PCLMULQDQ (bit 33) off


def userland(host: Host, seconds: int = 1, x86: bool = True) -> UserlandResult:
    """`openssl speed -elapsed -evp` for AES-GCM and ChaCha20-Poly1305, plus AES-NI masked."""
    version: str | None = None
    speeds: list[CipherSpeed] = []

    def one(cipher: str, env: str) -> float | None:
        nonlocal version
        base = f"{env}openssl speed -elapsed -seconds {seconds} -evp {cipher}"
        res = host.run(base, timeout=seconds * 6 * 4 + 60)
        if not res.ok:  # OpenSSL before 1.1.0 has no -seconds
            res = host.run(f"{env}openssl speed -elapsed -evp {cipher}", timeout=3 * 6 * 4 + 60)
        parsed = openssl_speed.parse(res.stdout.decode(errors="replace"))
        version = version or parsed.version
        row = parsed.row(cipher)
        return row.bulk_bytes_per_s if row else None

    for cipher in USERLAND_CIPHERS:
        plain = one(cipher, "")
        masked = one(cipher, f"OPENSSL_ia32cap={shlex.quote(IA32CAP_MASK)} ") if x86 else None
        speeds.append(CipherSpeed(cipher, plain, masked))
    prefer, advice = userland_advice(speeds)
    return UserlandResult(version, speeds, prefer, advice)


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
