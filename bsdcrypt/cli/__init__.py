"""The typer layer, the only one that imports typer: options -> one flow -> render -> exit code.

app.py         the app, main() (exit codes, signals, usage errors), command registration
<command>.py   one module per command group (enable, bench, fleet, analyze, userland), each register(app)

`bsdcrypt.cli:main` is the console entry point.
"""

from bsdcrypt.cli.app import *  # noqa: F403
