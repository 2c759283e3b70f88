"""Suite-wide settings and fixtures.

Hypothesis: no per-example deadline and no too-slow health check. The machines that run this suite are
often heavily loaded, and a property test must fail on a wrong answer, never on a slow one.
"""

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("loaded-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("loaded-machine")


# --------------------------------------------------------------------------- the CLI in a subprocess

ROOT = Path(__file__).resolve().parent.parent
QUIET_ENV = ("BSDCRYPT_VERBOSE", "NO_COLOR")  # the caller's settings that would change what is printed


def run_cli(
    *args: str, env: dict[str, str] | None = None, unset: tuple[str, ...] = (), cwd: Path | str | None = ROOT,
    timeout: float = 120, check: bool = False, **kw: Any,
) -> subprocess.CompletedProcess[Any]:
    """`python -m bsdcrypt ARGS` as a user runs it: its own process (exit status, signals, stdout and
    stderr apart), from the checkout. `env` is added to this environment, from which BSDCRYPT_VERBOSE,
    NO_COLOR and the names in `unset` are taken out first; text output unless `text=False`; stdout and
    stderr captured unless given; other keywords go to subprocess.run (`input`, `stdin`, `encoding`...).
    A non-zero exit is returned, not raised, unless `check`."""
    full = {k: v for k, v in os.environ.items() if k not in QUIET_ENV and k not in unset} | (env or {})
    kw.setdefault("text", True)
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "bsdcrypt", *args], cwd=cwd, env=full, timeout=timeout,
                          check=check, **kw)


@pytest.fixture()
def cli() -> Callable[..., subprocess.CompletedProcess[Any]]:
    """The one way a test runs bsdcrypt in a subprocess: `cli("status", "-f", "json")` (see run_cli)."""
    return run_cli
