"""`sysctl kern.ipc.tls` output -> KtlsState.

Names (sys/kern/uipc_ktls.c): kern.ipc.tls.enable, .cbc_enable, .stats.{active,offload_total,
enable_calls,switch_to_ifnet,switch_to_sw,...}, per-path session counts kern.ipc.tls.{sw,ifnet,toe}
.{cbc,gcm,chacha20}; sys/opencrypto/ktls_ocf.c adds kern.ipc.tls.stats.ocf.* (13.x:
tls12_gcm_encrypts ...; 14.x: tls12_gcm_crypts ...). A kernel without KTLS (12.x, or no options
KERN_TLS) answers `sysctl: unknown oid 'kern.ipc.tls'`. `sysctl kern.ipc.tls.enable=1` prints
`kern.ipc.tls.enable: 0 -> 1` (the new value counts).
"""

from __future__ import annotations

from bsdcrypt.facts import KtlsState
from bsdcrypt.parsers.sysctl import parse_sysctl, unknown_oids

PREFIX = "kern.ipc.tls"
PATHS = ("sw", "ifnet", "toe")
CIPHERS = ("cbc", "gcm", "chacha20")


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.split("->")[-1].strip()
    try:
        return int(value)
    except ValueError:
        return None


def parse_ktls(text: str) -> KtlsState:
    """Never raises; a text without any kern.ipc.tls line says nothing (present None)."""
    values = {k: v for k, v in parse_sysctl(text).items() if k == PREFIX or k.startswith(PREFIX + ".")}
    missing = unknown_oids(text)
    if not values:
        return KtlsState(present=False if PREFIX in missing else None)
    enable = _int(values.get(f"{PREFIX}.enable"))
    sessions: dict[str, dict[str, int]] = {}
    for path in PATHS:
        counts = {c: n for c in CIPHERS if (n := _int(values.get(f"{PREFIX}.{path}.{c}"))) is not None}
        if counts:
            sessions[path] = counts
    ocf = {
        k.rsplit(".", 1)[1]: n for k, v in values.items()
        if k.startswith(f"{PREFIX}.stats.ocf.") and (n := _int(v)) is not None
    }
    return KtlsState(
        present=True,
        enabled=None if enable is None else enable != 0,
        sessions=sessions,
        ocf=ocf,
        active=_int(values.get(f"{PREFIX}.stats.active")),
    )
