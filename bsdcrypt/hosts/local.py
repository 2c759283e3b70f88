"""This machine as a Host: `/bin/sh -s` run by subprocess, the script on stdin, as over SSH."""

from __future__ import annotations

import subprocess

from bsdcrypt.errors import HostError
from bsdcrypt.hostapi import REMOTE_COMMAND, RunResult, stdin_script


class LocalHost:
    """This machine, via subprocess: `/bin/sh -s` with the script on stdin, as over SSH.

    `login_shell` (tests): run REMOTE_COMMAND through that shell's `-c`, as sshd does with the
    user's login shell (e.g. tcsh, root's shell on FreeBSD before 14.0).
    """

    spec = "local"
    kind = "local"
    can_exec = True

    def __init__(self, login_shell: str | None = None) -> None:
        import socket

        self.name = socket.gethostname()
        self.login_shell = login_shell

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        argv = REMOTE_COMMAND.split() if self.login_shell is None else [self.login_shell, "-c", REMOTE_COMMAND]
        try:
            proc = subprocess.run(
                argv,
                input=stdin_script(command, input),
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise HostError(f"local command timed out after {timeout:g}s") from exc
        except OSError as exc:
            raise HostError(f"cannot run /bin/sh locally: {exc.strerror}") from exc
        return RunResult(proc.returncode, proc.stdout, proc.stderr)

    def abort(self) -> None:  # a local command ends at its timeout
        return None

    def close(self) -> None:
        return None
