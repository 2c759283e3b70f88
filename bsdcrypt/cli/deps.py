"""A missing Python dependency as one line naming what to install (docs/install-freebsd.md).

bsdcrypt imports some of its dependencies only where they are needed (Jinja2 for `-f html`, paramiko
for SSH hosts), so an installation made with `pip install --no-deps` over FreeBSD packages can lack
one and still run `status`. When a command then needs it, the user gets this line and exit status
EXIT_MISSING, never a traceback. Nothing here imports anything: it must work when imports fail.
"""

from __future__ import annotations

import sys

EXIT_MISSING = 3  # an error, as every other one (docs/output.md): "unknown" to a monitoring system

# top-level module -> (PyPI name, FreeBSD port, what needs it)
KNOWN: dict[str, tuple[str, str, str]] = {
    "typer": ("typer", "devel/py-typer", "every command"),
    "click": ("click", "devel/py-click", "every command (through typer)"),
    "rich": ("rich", "textproc/py-rich", "help (through typer)"),
    "shellingham": ("shellingham", "devel/py-shellingham", "shell completion (through typer)"),
    "yaml": ("PyYAML", "devel/py-pyyaml", "recordings and -f yaml"),
    "tabulate": ("tabulate", "devel/py-tabulate", "the tables"),
    "jinja2": ("Jinja2", "devel/py-Jinja2", "-f html"),
    "markupsafe": ("MarkupSafe", "textproc/py-markupsafe", "-f html (through Jinja2)"),
    "paramiko": ("paramiko", "security/py-paramiko", "SSH hosts (user@host, fleet-audit)"),
    "cryptography": ("cryptography", "security/py-cryptography", "SSH hosts"),
    "bcrypt": ("bcrypt", "security/py-bcrypt", "SSH hosts (through paramiko)"),
    "nacl": ("PyNaCl", "security/py-pynacl", "SSH hosts (through paramiko)"),
}


def flavour() -> str:
    """The FreeBSD package prefix of the running Python: py311- for Python 3.11."""
    return f"py{sys.version_info.major}{sys.version_info.minor}-"


def package(port: str) -> str:
    """The FreeBSD package name of a Python port for the running Python (devel/py-Jinja2 -> py311-Jinja2)."""
    return flavour() + port.split("/", 1)[1].removeprefix("py-")


def missing_line(exc: BaseException) -> str | None:
    """`bsdcrypt: ...` for an ImportError of a module bsdcrypt depends on; None for anything else."""
    if not isinstance(exc, ImportError):
        return None
    name = (getattr(exc, "name", None) or "").split(".", 1)[0]
    if name not in KNOWN:
        return None
    pypi, port, needed_by = KNOWN[name]
    return (
        f"bsdcrypt: the Python package {pypi} is missing (module {name}, needed for {needed_by}): "
        f"install it with `pkg install {package(port)}` on FreeBSD, or `pip install {pypi}`"
    )
