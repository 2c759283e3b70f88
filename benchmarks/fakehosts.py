"""Fake FreeBSD hosts for the fleet benchmark: one chroot per recording that really runs the probe.

Each root holds the real sh (dash), cat, grep, dd, head, sed, tr and wc of this machine (copied once, with their
libraries, into a base folder; roots hard-link the copies, never the system's files), the files the
probe reads (/var/run/dmesg.boot, /boot/loader.conf, /etc/os-release, /boot/kernel/*.ko ...) with
the recorded contents, and at the FreeBSD paths of the commands it runs (/sbin/sysctl, /usr/bin/uname,
/sbin/kldstat, /sbin/geli, /bin/freebsd-version, /usr/bin/id ...) a small C stand-in (fakecmd.c)
that prints what the recording says that exact command line printed, with the recorded exit
status, in the write pattern of the real program. The probe script arriving over SSH runs unchanged
(`chroot ROOT /bin/sh -c "$SSH_ORIGINAL_COMMAND"`): its frames are written by sh's printf, each
step in its own subshell, as on a real host.

`check_root` runs the probe in a root locally and demands that every recorded step comes back
byte for byte; `count_writes` counts the write(2) calls that reach the probe's stdout in one run.
Everything lives under the work folder given; nothing of this machine is changed.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bsdcrypt import probe  # noqa: E402
from bsdcrypt.recording import load  # noqa: E402

# The command's FreeBSD path, and how the real program writes (fakecmd.c's modes).
STANDINS: dict[str, tuple[str, str]] = {
    "uname": ("/usr/bin/uname", "b"),
    "freebsd-version": ("/bin/freebsd-version", "l"),  # an sh script: one echo per line
    "sysctl": ("/sbin/sysctl", "u"),  # setbuf(stdout, 0)
    "kldstat": ("/sbin/kldstat", "b"),
    "geli": ("/sbin/geli", "b"),
    "id": ("/usr/bin/id", "b"),
    "opnsense-version": ("/usr/local/sbin/opnsense-version", "l"),  # an sh script
    "ghostbsd-version": ("/usr/local/bin/ghostbsd-version", "l"),
}
# Real programs of this machine the probe runs itself (sh's builtins do the rest: printf, test, eval).
REAL_TOOLS = {"/bin/sh": "/bin/dash", "/bin/cat": "/bin/cat", "/bin/dd": "/bin/dd", "/usr/bin/grep": "/usr/bin/grep",
              "/usr/bin/head": "/usr/bin/head", "/usr/bin/sed": "/bin/sed", "/usr/bin/tr": "/usr/bin/tr",
              "/usr/bin/wc": "/usr/bin/wc"}  # the probe sizes a file (wc -c) before reading it
DIRS = ("bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin", "usr/local/sbin", "dev", "etc", "var/run",
        "boot/kernel", "proc", "tmp")
NOT_FOUND = re.compile(r"^[\w.-]+: (No such file or directory)\n$")


class Unmodelled(Exception):
    """A recorded step the fake host cannot reproduce with real files and stand-ins."""


def _ldd(binary: str) -> list[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return re.findall(r"(/\S+\.so[.\d]*)", out)


def build_base(work: Path) -> Path:
    """The shared part of every root: the real tools with their libraries, and the compiled stand-in."""
    base = work / "base"
    if (base / "fakecmd").exists():
        return base
    base.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for inside, real in REAL_TOOLS.items():
        files[inside] = real
        for lib in _ldd(real):
            files[lib] = lib
    for inside, real in files.items():
        dest = base / inside.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(real), dest)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("the fake hosts need a C compiler (cc) for benchmarks/fakecmd.c")
    subprocess.run([cc, "-O2", "-o", str(base / "fakecmd"), str(REPO / "benchmarks" / "fakecmd.c")], check=True)
    return base


def _link_tree(base: Path, root: Path) -> None:
    for dirpath, _, names in os.walk(base):
        rel = Path(dirpath).relative_to(base)
        for name in names:
            if rel == Path(".") and name == "fakecmd":
                continue
            dest = root / rel / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.link(Path(dirpath) / name, dest)


def _answer_key(command: str) -> str:
    return command.replace("/", "%")


def build_root(work: Path, recording: Path) -> Path:
    """The chroot of one recording: real files for what the probe reads, stand-ins for what it runs."""
    base = build_base(work)
    root = work / "roots" / recording.stem
    if root.exists():
        return root
    tmp = root.with_name(root.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for d in DIRS:
        (tmp / d).mkdir(parents=True, exist_ok=True)
    _link_tree(base, tmp)
    os.mknod(tmp / "dev" / "null", 0o666 | 0o020000, os.makedev(1, 3))
    os.chmod(tmp / "tmp", 0o1777)
    (tmp / ".fake").mkdir()
    _, evidence = load(recording)
    steps = evidence.steps
    for name, cmd in probe.STEPS:
        word = cmd.split()[0]
        st = steps.get(name)
        if word in STANDINS:
            path, mode = STANDINS[word]
            if st is None:  # a step newer than the recording: the host has no such command
                rc, out = 127, f"{word}: not found\n".encode()
            else:
                rc, out = st.rc, st.out
            (tmp / ".fake" / _answer_key(" ".join(shlex.split(cmd)))).write_bytes(f"{rc} {mode}\n".encode() + out)
            exe = tmp / path.lstrip("/")
            if not exe.exists():
                os.link(base / "fakecmd", exe)
        else:
            _model_builtin_step(tmp, name, st)
    for key, st in steps.items():
        if key.startswith("file:"):
            path = key[len("file:"):]
            if st.rc == 0:
                dest = tmp / path.lstrip("/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(st.out)
            elif not (st.rc == 1 and st.out == f"cat: {path}: No such file or directory\n".encode()):
                raise Unmodelled(f"{recording.name}: {key} rc {st.rc}: {st.out[:60]!r}")
        elif key.startswith("exists:"):
            if st.rc == 0:
                dest = tmp / key[len("exists:"):].lstrip("/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(b"")
    tmp.rename(root)
    return root


def _model_builtin_step(root: Path, name: str, st: probe.Step | None) -> None:
    """Steps run by grep/test on Linux paths: the recorded result comes from the files being there or not."""
    if name == "linux_cpu_flags":
        if st is None or st.rc == 2 and st.out == b"grep: /proc/cpuinfo: No such file or directory\n":
            return
        if st.rc == 0:
            (root / "proc" / "cpuinfo").write_bytes(st.out)
            return
    elif name == "linux_aesni_intel":
        if st is None:
            return
        if st.rc == 0 and not st.out:
            (root / "sys" / "module" / "aesni_intel").mkdir(parents=True)
            return
        if st.rc == 1 and not st.out:  # no module dir, and /proc/crypto without an aesni driver
            (root / "proc" / "crypto").write_bytes(b"")
            return
    elif st is None:
        return
    raise Unmodelled(f"step {name} rc {st.rc if st else None}: {(st.out if st else b'')[:60]!r}")


def run_probe(root: Path, script: str) -> bytes:
    """The probe in `root` as sshd would start it there: `sh -c '/bin/sh -s'`, the script on stdin."""
    proc = subprocess.run(["/usr/sbin/chroot", str(root), "/bin/sh", "-c", "/bin/sh -s"], input=script.encode(),
                          capture_output=True, check=False, timeout=60)
    return proc.stdout


def check_root(root: Path, recording: Path, buffered: bool = True) -> None:
    """Every step of the recording comes back from the root byte for byte, with its exit status."""
    token = probe.new_token()
    got = probe.parse_output(run_probe(root, probe.build_script(token, buffered=buffered)), token)
    _, evidence = load(recording)
    for name, st in evidence.steps.items():
        g = got.steps.get(name)
        if g is None or g.rc != st.rc or g.out != st.out:
            raise Unmodelled(f"{recording.name}: step {name}: recorded rc {st.rc} {st.out[:60]!r}, "
                             f"fake host gave {None if g is None else (g.rc, g.out[:60])!r}")


def count_writes(root: Path, script: str) -> int:
    """How many write(2) calls put the probe's output on its stdout in one run in `root`: stdout is a
    SOCK_SEQPACKET socket, which keeps every write as one message."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours:
        proc = subprocess.Popen(["/usr/sbin/chroot", str(root), "/bin/sh", "-c", "/bin/sh -s"],
                                stdin=subprocess.PIPE, stdout=theirs.fileno(), stderr=subprocess.DEVNULL)
        theirs.close()
        assert proc.stdin is not None
        proc.stdin.write(script.encode())
        proc.stdin.close()
        count = 0
        while ours.recv(1 << 20):
            count += 1
        proc.wait(timeout=60)
    return count
