"""Shared by the bench tests: cleanup retries without waiting."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_retry_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bsdcrypt.bench.cleanup.RETRY_DELAY_S", 0.0)  # where cleanup reads it
