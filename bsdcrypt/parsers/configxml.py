"""pfSense/OPNsense config.xml: the <crypto_hardware> setting (the probe greps only that line)."""

from __future__ import annotations

import re

_CRYPTO_TAG = re.compile(r"<crypto_hardware>([^<]*)</crypto_hardware>|<crypto_hardware\s*/>")


def crypto_hardware(text: str) -> str:
    """The <crypto_hardware> value ("aesni", "aesni,cryptodev"...); "" when the tag is empty or absent."""
    m = _CRYPTO_TAG.search(text)
    return (m.group(1) or "").strip() if m else ""
