"""The typer layer, the only one that imports typer: options -> one flow -> render -> exit code.

app.py         the app, main() (exit codes, signals, usage errors), command registration
<command>.py   one module per command group (enable, bench, fleet, analyze, userland), each register(app)

`bsdcrypt.cli:main` is the console entry point.
"""

try:
    from bsdcrypt.cli.app import *  # noqa: F403
except ImportError as _exc:  # typer (or click, rich) not installed: one line naming it, not a traceback
    from bsdcrypt.cli.deps import EXIT_MISSING, missing_line

    _line = missing_line(_exc)
    if _line is None:
        raise

    def main() -> None:
        import sys

        print(_line, file=sys.stderr)
        sys.exit(EXIT_MISSING)
