"""bsdcrypt: hardware-accelerated kernel crypto for FreeBSD-family hosts."""

__version__ = "0.1.0"
