"""bsdcrypt: hardware-accelerated kernel crypto for FreeBSD-family hosts."""

import os
import signal
import sys

__version__ = "0.1.0"


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C before the command runs (while typer and the rest are imported): one line and 130, as
    for Ctrl-C at any other time, not a traceback from inside an import."""
    os.write(2, b"bsdcrypt: interrupted\n")
    os._exit(130)


# Only when this process is the bsdcrypt command (`bsdcrypt ...` or `python -m bsdcrypt ...`; argv[0] is
# "-m" while a -m package is imported) and Ctrl-C has Python's usual handler (not ignored, as for a
# background job); cli.main() puts that handler back once its imports are done (started()).
_starting = (
    (os.path.basename(sys.argv[0]) == "bsdcrypt" or sys.argv[:1] == ["-m"])
    and signal.getsignal(signal.SIGINT) is signal.default_int_handler
)
if _starting:
    try:
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    except ValueError:  # imported outside the main thread: not the command starting
        _starting = False


def started() -> None:
    """The command's imports are done: Ctrl-C raises KeyboardInterrupt again (the close paths run)."""
    global _starting
    if _starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _starting = False
