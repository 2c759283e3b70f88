"""The bench's model: before/after speedup and its notes, userland cipher advice."""

from __future__ import annotations

import pytest
from bench_host import PARAMS, ScriptedHost

from bsdcrypt.bench.model import CipherSpeed, Sample, compare
from bsdcrypt.bench.openssl import userland_advice
from bsdcrypt.bench.run import measure


def test_compare_and_compiled_in_case() -> None:
    before = measure(ScriptedHost(crypto="software"), PARAMS)
    after = measure(ScriptedHost(crypto="accelerated software"), PARAMS)
    g = before.get("geli", "write")
    assert g is not None
    g.samples[0] = Sample(g.samples[0].bw_bytes / 5, 1.0, 10000)
    sp = compare(before, after)
    assert sp.ratio["write"] == pytest.approx(5.0)
    assert "software -> accelerated software" in sp.note
    after.host.driver_compiled_in = True  # the reason comes from the facts when not given
    none = compare(None, after)
    assert none.ratio["write"] is None and "cannot be unloaded" in none.note
    assert none.ceiling_mib_s["write"] is not None
    # the reason given wins: never "compiled in" when the "before" failed or the driver was loaded
    failed = compare(None, after, "the 'before' measurement failed at step 'preflight: fio'")
    assert "failed at step 'preflight: fio'" in failed.note and "compiled" not in failed.note
    assert failed.no_before == "the 'before' measurement failed at step 'preflight: fio'"
    after.host.driver_compiled_in, after.host.driver_state = False, "loaded"
    assert "already loaded" in compare(None, after).note
    after.host.driver_state = "no-device"
    assert "compiled" not in compare(None, after).note


def test_userland_advice() -> None:
    fast_aes = [
        CipherSpeed("aes-128-gcm", 3.7e9, 1.6e8),
        CipherSpeed("chacha20-poly1305", 2.3e9, 2.3e9),
    ]
    prefer, text = userland_advice(fast_aes)
    assert prefer == "AES-GCM" and "AES-NI makes" in text
    no_aesni = [
        CipherSpeed("aes-128-gcm", 1.6e8, 1.5e8),
        CipherSpeed("chacha20-poly1305", 9.0e8, 9.0e8),
    ]
    prefer, text = userland_advice(no_aesni)
    assert prefer == "ChaCha20-Poly1305" and "not using AES-NI" in text
