"""Run one command and write its wait4 measures as JSON, from a small process of its own.

    python -S benchmarks/rusage.py OUT.json [--deadline SECONDS] COMMAND [ARG...]

Why: Linux keeps a process's peak RSS across fork and exec (at exec the old address space's high-water
mark goes into the new program's ru_maxrss; a forked child starts with its parent's resident pages).
A command started by a benchmark whose own process once held 120 MB (a parsed report, pyinfra's
printed output) reports ru_maxrss >= 120 MB whatever it used itself. Started from this fresh, small
interpreter instead, the command's ru_maxrss is its own peak (or this script's ~10 MB, if that is more).

OUT.json: {"rc": exit code, "wall_s", "cpu_s": user+sys of the command and the children it waited for,
"maxrss_mb", "killed": true if the deadline passed}. The command inherits stdin, stdout and stderr; it runs
in a process group of its own, which gets SIGKILL when --deadline seconds have passed.
"""

import json
import os
import signal
import sys
import time


def main() -> None:
    out, cmd = sys.argv[1], sys.argv[2:]
    deadline = 0
    if cmd[:1] == ["--deadline"]:
        deadline, cmd = int(cmd[1]), cmd[2:]
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    killed = []

    def kill(*_: object) -> None:
        killed.append(True)
        os.killpg(pid, signal.SIGKILL)

    signal.signal(signal.SIGALRM, kill)
    signal.alarm(deadline)
    _, status, ru = os.wait4(pid, 0)
    signal.alarm(0)
    wall = time.monotonic() - start
    with open(out, "w") as fh:
        json.dump({"rc": os.waitstatus_to_exitcode(status), "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                   "maxrss_mb": ru.ru_maxrss / 1024, "killed": bool(killed)}, fh)


if __name__ == "__main__":
    main()
