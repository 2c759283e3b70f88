"""The bounds both SSH paths share (`--ssh paramiko`, client.py; `--ssh openssh`, openssh.py), in a
module that imports nothing, so the openssh path does not load paramiko to read them."""

from __future__ import annotations

DEFAULT_TIMEOUT = 30.0  # a host's whole conversation, when the caller sets none
DEFAULT_CONNECT_TIMEOUT = 15.0  # TCP connect + SSH banner, when the config sets no ConnectTimeout
SLOW_NOTE_AFTER = 3.0  # seconds without a banner (paramiko) or a byte from ssh (openssh) before `on_slow`
MAX_OUTPUT = 32 * 1024 * 1024  # stdout and stderr together, when the caller sets no cap
