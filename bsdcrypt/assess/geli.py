"""GELI providers: their crypto path now, and whether a driver could accelerate them."""

from __future__ import annotations

from bsdcrypt.facts import GeliProvider
from bsdcrypt.status import GeliInfo, Status

# The names under which a driver lists the HMAC a GELI provider needs (aesni: SHA1/SHA256; ossl: SHA2-*-HMAC).
_HMAC_NEEDS = {
    "HMAC/SHA1": ("SHA1", "SHA1-HMAC"),
    "HMAC/SHA256": ("SHA256", "SHA2-256-HMAC"),
    "HMAC/SHA384": ("SHA2-384-HMAC",),
    "HMAC/SHA512": ("SHA2-512-HMAC",),
}


def _driver_algorithms(status: Status) -> list[set[str]] | None:
    """What each AES driver does (or would do once loaded, judging by the CPU flags)."""
    attached = [d for d in (status.driver, *status.other_drivers) if d.attached]
    if attached:
        return [set(d.algorithms) for d in attached]
    if status.cpu.aesni is None:
        return None
    if not status.cpu.aesni:
        return []
    algos = {"AES-CBC", "AES-XTS"}
    if status.driver.name == "aesni" and status.cpu.sha:
        algos |= {"SHA1", "SHA256"}
    return [algos]


def _accelerable(p: GeliProvider, drivers: list[set[str]] | None) -> bool | None:
    """GELI makes one OCF session for cipher and HMAC: one driver must do both, or all runs in software."""
    enc = (p.encryption or "").upper()
    if enc not in ("AES-XTS", "AES-CBC"):
        return False
    if drivers is None:
        return None
    need = _HMAC_NEEDS.get(p.authentication.upper(), ()) if p.authentication else None
    for algos in drivers:
        if enc in algos and (need is None or any(n in algos for n in need)):
            return True
    return False


def geli_infos(providers: list[GeliProvider], status: Status) -> list[GeliInfo]:
    accel_now = bool(status.driver.attached and status.driver.accelerates_aes) or any(
        d.attached and d.accelerates_aes for d in status.other_drivers
    )
    algos = _driver_algorithms(status)
    out: list[GeliInfo] = []
    for p in providers:
        crypto = (p.crypto or "").lower() or None
        # g_eli_dumpconf prints hardware, software, accelerated software, or UNKNOWN (no driver chosen yet);
        # anything else cannot be judged either.
        known = crypto in ("hardware", "software", "accelerated software")
        accelerated = crypto in ("hardware", "accelerated software") if known else None
        accelerable = _accelerable(p, algos)
        out.append(
            GeliInfo(
                name=p.name,
                encryption=p.encryption,
                key_length=p.key_length,
                crypto=p.crypto,
                authentication=p.authentication,
                accelerated=accelerated,
                accelerable=accelerable,
                needs_reattach=bool(accelerated is False and accelerable and accel_now),
            )
        )
    return out

