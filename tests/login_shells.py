"""Login shells the tests run commands through (sshd runs `$SHELL -c LINE`): tcsh, sh, bash."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tcsh() -> str:
    path = shutil.which("tcsh") or shutil.which("csh")
    if path:
        return path
    if os.environ.get("BSDCRYPT_REQUIRE_TCSH") == "1":
        pytest.fail("BSDCRYPT_REQUIRE_TCSH=1 but tcsh is missing (apt install tcsh)")
    pytest.skip("tcsh not installed")


def login_shells() -> list[str | None]:
    return [None, *(s for s in ("/bin/sh", shutil.which("bash")) if s)]
