"""The run context: the OpenSSH client config applied to a host (`Target`), and key files.

paramiko's SSHConfig does not know `Include`; `read_config` expands it the way ssh_config(5) defines
it before paramiko parses the text (see `read_config`).
"""

from __future__ import annotations

import base64
import dataclasses
import getpass
import glob
import io
import os
import re
import shlex
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paramiko

from bsdcrypt.ssh.errors import SSHError
from bsdcrypt.ssh.knownhosts import KnownHosts, known_hosts_name

DEFAULT_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ed25519")
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")


@dataclass
class Target:
    """Where and how to connect, after the client config was applied."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: list[str]
    identities_only: bool
    proxy_jump: str | None
    proxy_command: str | None
    connect_timeout: float | None
    user_known_hosts: list[str]
    global_known_hosts: list[str]
    host_key_alias: str | None
    hash_known_hosts: bool
    accept_new: bool

    @property
    def known_hosts_name(self) -> str:
        """The name known_hosts lines are looked up and added under: `HostKeyAlias` exactly as written
        (ssh never appends the port to it: sshconnect.c, get_hostfile_hostname_ipaddr), else the host
        name, as `[host]:port` when the port is not 22."""
        if self.host_key_alias:
            return self.host_key_alias
        return known_hosts_name(self.hostname, self.port)

    def identity(self) -> tuple[object, ...]:
        """Everything that decides the connection, for duplicate detection: two hosts-file lines with
        the same identity make the very same connection (the alias itself is left out; the host name
        is compared without case, as DNS does)."""
        names = [f.name for f in dataclasses.fields(self)][1:]  # shallow: astuple deep-copies (~0.1 ms a host)
        values = [tuple(v) if isinstance(v, list) else v for v in (getattr(self, n) for n in names)]
        values[0] = str(values[0]).lower()
        return tuple(values)


def _expand_path(path: str, target: dict[str, str]) -> str:
    if "%" not in path:  # nothing to substitute (the common case): skip the token table
        return os.path.expanduser(path)
    for token, value in (("%d", str(Path.home())), ("%h", target["h"]), ("%p", target["p"]),
                         ("%r", target["r"]), ("%u", target["u"]), ("%%", "%")):
        path = path.replace(token, value)
    return os.path.expanduser(path)


def _percent_expand(value: str, tokens: dict[str, str], what: str) -> str:
    """ssh's percent_expand: one pass, so a value's own `%` never expands again; unknown tokens are errors."""

    def one(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in tokens:
            raise SSHError("config", f"{what}: unknown token %{key} (allowed: "
                           + ", ".join("%" + k for k in tokens) + ")")
        return tokens[key]

    if value.endswith("%") and not value.endswith("%%"):
        raise SSHError("config", f"{what}: a lone % at the end")
    return re.sub(r"%(.)", one, value)


# -- Include (paramiko's SSHConfig has none)

INCLUDE_MAX_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
USER_CONFIG_DIR = "~/.ssh"
SYSTEM_CONFIG_DIR = "/etc/ssh"
_KEYWORD = re.compile(r"^\s*(\w+)(?:\s*=\s*|\s+)(.*?)\s*$")
_NO_PARAM = ("all", "canonical", "final")

Clause = tuple[str, str]  # ("host" | "match", the rest of the line)


def parse_port(value: str) -> int | None:
    """A Port value as ssh takes it (readconf.c, a2port): one decimal number 1-65535; None otherwise."""
    word = _one_word(value)
    if word is None or not (word.isascii() and word.isdigit()):
        return None
    number = int(word)
    return number if 1 <= number <= 65535 else None


_TIME = re.compile(r"(\d+)([smhdw]?)", re.IGNORECASE)
_TIME_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_seconds(value: str) -> int | None:
    """A time value as ssh takes it (misc.c, convtime): numbers with optional units, `90`, `1m30s`; None
    when malformed. ConnectTimeout 0 means no limit, as in ssh."""
    word = _one_word(value)
    if not word or not word.isascii() or _TIME.sub("", word):
        return None
    return sum(int(n) * _TIME_UNITS[unit.lower()] for n, unit in _TIME.findall(word))


def _one_word(value: str) -> str | None:
    """The one argument of a keyword, unquoted, a trailing `# comment` dropped (as ssh's argv_split)."""
    try:
        words = shlex.split(value, comments=True)
    except ValueError:
        return None
    return words[0] if len(words) == 1 else None


# Values ssh checks when it reads the file, in every block, matching or not: a bad one stops ssh
# ("line N: Bad port"); bsdcrypt refuses the config the same way instead of failing per host.
_CHECKED = {"port": ("port", parse_port), "connecttimeout": ("time value", parse_seconds)}


def _check_value(key: str, value: str, path: str, number: int, where: str = "") -> None:
    what, parse = _CHECKED[key]
    if parse(value) is None:
        shown = value if len(value) <= 40 else value[:39] + "…"
        raise SSHError("config", f"{path} line {number}{where}: bad {what} {shown!r}"
                       + (" (a number 1-65535)" if key == "port" else " (e.g. 30, 1m30s)"))


def _check_lines(lines: list[str], path: str) -> None:
    for number, line in enumerate(lines, start=1):
        m = _KEYWORD.match(line)
        if m is not None and m.group(1).lower() in _CHECKED:
            _check_value(m.group(1).lower(), m.group(2), path, number)


def read_config(path: str, user_config: bool = True) -> str:
    """The text of an ssh_config file with its `Include` directives expanded, for paramiko to parse.

    As in ssh_config(5): each argument of Include is a glob(7) pattern (`~` allowed in user configs
    only); a relative one is taken from ~/.ssh for a user config (including `-F`/--ssh-config) and
    from /etc/ssh for the system one; the matches are read in lexical order; a pattern matching
    nothing is skipped. Include may sit inside a Host or Match block: the included file then applies
    only when that block does (its own Host/Match blocks apply when both match), and after it the
    including block goes on. Includes nest at most 16 deep (OpenSSH's limit). As in readconf.c, a
    match that cannot be opened because it does not exist (a dangling symlink) is skipped; any other
    error stops. Files are bytes to ssh: text that is not UTF-8 (a Latin-1 comment) is read with
    surrogateescape, so every byte survives into the values (`ssh -G` prints them unchanged).

    The expanded text is flat: an included Host/Match block under an outer one becomes one `Match`
    line with both conditions (`Host` patterns as `originalhost`, which is what Host matches), and
    the outer block's line is repeated after the included text. (A repeated `Match` is evaluated
    again there, so a `Match host`/`exec` after an included HostName could differ from ssh, which
    keeps the first result; plain `Host` blocks are unaffected.)
    """
    return "\n".join(_expand(path, user_config, [], 0)) + "\n"


MAX_CONFIG_FILE = 1 << 20  # one ssh config file (each Include's too): real ones are a few KiB


def _read_text(path: str, where: str, missing_ok: bool = False) -> str | None:
    """The text of a config file, every byte kept (surrogateescape); None if it does not exist and
    `missing_ok` (an Include's match: ssh skips ENOENT there)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_FILE + 1)
        if len(data) > MAX_CONFIG_FILE:
            raise SSHError("config", f"ssh config {path}{where} is larger than {MAX_CONFIG_FILE >> 20} MiB: "
                           "not an ssh config bsdcrypt reads")
        return data.decode("utf-8", errors="surrogateescape")
    except FileNotFoundError as exc:
        if missing_ok:
            return None
        raise SSHError("config", f"cannot read ssh config {path}{where}: {exc.strerror}") from exc
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise SSHError("config", f"cannot read ssh config {path}{where}: {why}") from exc


def _expand(path: str, user_config: bool, outer: list[Clause], depth: int, where: str = "") -> list[str]:
    if depth > INCLUDE_MAX_DEPTH:
        raise SSHError("config", f"ssh config includes nested more than {INCLUDE_MAX_DEPTH} deep{where} "
                       "(an Include loop?)")
    text = _read_text(path, where, missing_ok=depth > 0)
    if text is None:  # an Include's match that does not exist (a dangling symlink): skipped, as ssh does
        return []
    lower = text.lower()
    if depth == 0 and "include" not in lower:
        lines = text.splitlines()
        if "port" in lower or "connecttimeout" in lower:
            _check_lines(lines, path)
        return lines
    out: list[str] = []
    local: Clause | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        m = _KEYWORD.match(line)
        if m is None or line.lstrip().startswith("#"):
            out.append(line)
            continue
        key = m.group(1).lower()
        if key in _CHECKED:
            _check_value(key, m.group(2), path, number, where)
        if key in ("host", "match"):
            local = (key, m.group(2))
            out.append(_header(outer + [local], path, number) if outer else line)
            continue
        if key != "include":
            out.append(line)
            continue
        here = f" (Include at {path} line {number})"
        cond = outer + ([local] if local is not None else [])
        try:
            patterns = shlex.split(m.group(2), comments=True)
        except ValueError as exc:
            raise SSHError("config", f"{path} line {number}: bad Include: {exc}") from exc
        if not patterns:
            raise SSHError("config", f"{path} line {number}: Include needs a file name")
        included = False
        for pattern in patterns:
            for name in _include_files(pattern, user_config, path, number):
                out += _expand(name, user_config, cond, depth + 1, here)
                included = True
        if included:
            out.append(_header(cond, path, number))  # back in the including block
    return out


def _include_files(pattern: str, user_config: bool, path: str, number: int) -> list[str]:
    if pattern.startswith("~") and not user_config:
        raise SSHError("config", f"{path} line {number}: bad include path {pattern} (~ only in user configs)")
    if not os.path.isabs(pattern) and not pattern.startswith("~"):
        pattern = os.path.join(USER_CONFIG_DIR if user_config else SYSTEM_CONFIG_DIR, pattern)
    pattern = os.path.expanduser(pattern)
    return [p for p in sorted(glob.glob(pattern)) if not os.path.isdir(p)]


def _header(cond: list[Clause], path: str, number: int) -> str:
    """One Host/Match line that matches when every clause of `cond` does."""
    if not cond:
        return "Host *"
    if len(cond) == 1:
        return f"{cond[0][0].capitalize()} {cond[0][1]}"
    criteria: list[str] = []
    for kind, value in cond:
        try:
            tokens = shlex.split(value)
        except ValueError as exc:
            raise SSHError("config", f"{path} line {number}: bad {kind.capitalize()} line: {exc}") from exc
        if kind == "host":
            criteria += ["originalhost", ",".join(tokens)]
            continue
        while tokens:
            word = tokens.pop(0)
            bare = word.lstrip("!").lower()
            if bare in _NO_PARAM:
                if bare != "all":  # `all` AND anything is that thing
                    criteria.append(word)
                continue
            criteria += [word, tokens.pop(0) if tokens else ""]
    return "Match " + (shlex.join(criteria) if criteria else "all")


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() in ("yes", "true", "on")


class _MatchExecResult:
    def __init__(self, ok: bool) -> None:
        self.ok = ok


class _MatchExec:
    """What paramiko.config calls `invoke` (`invoke.run(cmd, hide="stdout", warn=True).ok`), to run a
    `Match exec` command the way ssh does (readconf.c, execute_in_shell): `$SHELL -c COMMAND` (/bin/sh
    when $SHELL is unset or empty), stdin and stdout on /dev/null, stderr ours; it matches when it exits
    0, and one killed by a signal is an error, as in ssh. invoke would mirror our stdin into every such
    command, which fails ("I/O operation on closed file") when the fleet's workers look hosts up at
    once, and would load 0.1-0.2 s of modules. Commands still running can be killed (`kill_match_execs`).

    Installing it (`paramiko.config.invoke = _MatchExec`, at import of this module) is a process-wide
    change: every paramiko SSHConfig in this process, bsdcrypt's or not, then runs its `Match exec`
    commands through it."""

    _live: dict[subprocess.Popen[bytes], int] = {}  # command -> the thread waiting for it
    _lock = threading.Lock()

    @classmethod
    def run(cls, command: str, **_options: object) -> _MatchExecResult:
        shell = os.environ.get("SHELL") or "/bin/sh"
        try:
            # A session (so a process group) of its own: kill_all kills what the command started too
            # (`sleep 30; true` runs sleep as the shell's child).
            proc = subprocess.Popen([shell, "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            raise SSHError("config", f"cannot run Match exec {command!r} with {shell}: {exc.strerror}") from exc
        with cls._lock:
            cls._live[proc] = threading.get_ident()
        try:
            rc = proc.wait()
        finally:
            with cls._lock:
                cls._live.pop(proc, None)
        if rc < 0:
            raise SSHError("config", f"Match exec {command!r} was killed by signal {-rc}")
        return _MatchExecResult(rc == 0)

    @classmethod
    def kill_all(cls, thread: int | None = None) -> None:
        """SIGKILL the process group of every command still running (only those `thread` waits for, if
        given). A command is in `_live` until its waiter has reaped it, and its group id (its pid) cannot
        be reused before that."""
        with cls._lock:
            for proc, waiter in cls._live.items():
                if proc.returncode is not None or thread is not None and waiter != thread:
                    continue
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass


paramiko.config.invoke = _MatchExec  # type: ignore[attr-defined]  # process-wide: see _MatchExec


def kill_match_execs(thread: int | None = None) -> None:
    """Kill every `Match exec` command still running (an interrupted fleet run), or only those the
    thread `thread` waits for (a host past its deadline)."""
    _MatchExec.kill_all(thread)


# A Match line with an exec criterion (conservative: `Match host exec` counts too; that only costs speed).
_MATCH_EXEC = re.compile(r"^[ \t]*match\b.*\bexec\b", re.IGNORECASE | re.MULTILINE)


class _SSHConfig(paramiko.SSHConfig):
    """paramiko's SSHConfig, minus a per-host cost: `_tokenize` looks up the local user, host name
    and home folder and hashes them for every value of every lookup, even when the value holds
    no token. Every token starts with `%` or is `~`, so a value with neither is returned as is;
    values with tokens still go through paramiko."""

    def _tokenize(self, config: Any, target_hostname: str, key: str, value: Any) -> Any:
        if isinstance(value, str) and ("%" not in value and "~" not in value or key == "proxycommand"):
            return value  # ProxyCommand: SSHContext.target expands it in one pass, with %n, as ssh does
        return super()._tokenize(config, target_hostname, key, value)  # type: ignore[misc]


@dataclass
class SSHContext:
    """What every host of one run shares: config, known_hosts, loaded keys, policy."""

    config_path: str | None = None
    accept_new: bool = False
    use_agent: bool = True
    config: paramiko.SSHConfig = field(init=False)
    known_hosts: KnownHosts = field(init=False, default_factory=KnownHosts)
    _keys: dict[str, paramiko.PKey | str] = field(init=False, default_factory=dict)
    _key_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _user_config: bool = field(init=False, default=False)
    _local_user: str | None = field(init=False, default=None)
    _targets: dict[tuple[str, str | None, int | None], Target] = field(init=False, default_factory=dict)
    _target_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    match_exec: bool = field(init=False, default=False)  # a `Match exec` anywhere: lookups may be slow

    def __post_init__(self) -> None:
        self.config = _SSHConfig()
        paths: list[tuple[str, bool]]  # (file, is a user config)
        if self.config_path is not None:
            path = os.path.expanduser(self.config_path)
            if not os.path.isfile(path):
                raise SSHError("config", f"no ssh config file at {self.config_path}")
            paths = [(path, True)]  # like ssh -F: a user config (relative Includes from ~/.ssh)
        else:
            candidates = ((os.path.expanduser("~/.ssh/config"), True), (SYSTEM_CONFIG_DIR + "/ssh_config", False))
            paths = [(p, user) for p, user in candidates if os.path.isfile(p)]
        for path, user_config in paths:
            text = read_config(path, user_config)
            if _MATCH_EXEC.search(text):
                self.match_exec = True
            try:
                self.config.parse(io.StringIO(text))
            except paramiko.ConfigParseError as exc:
                raise SSHError("config", f"cannot use ssh config {path}: {exc}") from exc
            except Exception as exc:  # paramiko raises bare exceptions on odd syntax
                raise SSHError("config", f"cannot parse ssh config {path}: {exc}") from exc

    def target(self, alias: str, user: str | None = None, port: int | None = None) -> Target:
        """The config applied to a host, looked up once per run (the fleet's duplicate check and the
        host itself share it; `Match exec` commands run once). The Target is shared: do not modify it."""
        key = (alias, user, port)
        with self._target_lock:
            cached = self._targets.get(key)
        if cached is None:
            cached = self._target(alias, user, port)
            with self._target_lock:
                cached = self._targets.setdefault(key, cached)
        return cached

    def _target(self, alias: str, user: str | None, port: int | None) -> Target:
        try:
            opts: dict[str, Any] = dict(self._lookup(alias, user, port))
        except Exception as exc:  # Match exec failures and the like
            raise SSHError("config", f"ssh config lookup for {alias} failed: {exc}") from exc
        hostname = str(opts.get("hostname") or alias)
        the_port = port if port is not None else parse_port(str(opts.get("port", 22)))
        if the_port is None:  # read_config refused a bad Port already; a config reached another way
            raise SSHError("config", f"ssh config: bad port {str(opts.get('port'))[:40]!r} for {alias} "
                           "(a number 1-65535)")
        local_user = self.local_user()
        the_user = user or str(opts.get("user") or "") or local_user
        tokens = {"h": hostname, "p": str(the_port), "r": the_user, "u": local_user}
        ids = opts.get("identityfile")
        identity_files = [_expand_path(p, tokens) for p in ids] if ids else [
            os.path.expanduser(p) for p in DEFAULT_IDENTITIES
        ]
        ukh = str(opts.get("userknownhostsfile") or " ".join(DEFAULT_USER_KNOWN_HOSTS)).split()
        gkh = str(opts.get("globalknownhostsfile") or " ".join(DEFAULT_GLOBAL_KNOWN_HOSTS)).split()
        jump = opts.get("proxyjump")
        proxy = opts.get("proxycommand")
        if proxy and str(proxy).lower() != "none":
            proxy_tokens = {"h": hostname, "p": str(the_port), "r": the_user, "n": alias, "%": "%"}
            proxy = _percent_expand(str(proxy), proxy_tokens, f"ProxyCommand for {alias}")
        ct = parse_seconds(str(opts["connecttimeout"])) if opts.get("connecttimeout") else None
        strict = str(opts.get("stricthostkeychecking") or "").lower()
        return Target(
            alias=alias,
            hostname=hostname,
            port=the_port,
            user=the_user,
            identity_files=identity_files,
            identities_only=_yes(opts.get("identitiesonly")),
            proxy_jump=None if not jump or str(jump).lower() == "none" else str(jump),
            proxy_command=None if not proxy or str(proxy).lower() == "none" else str(proxy),
            connect_timeout=float(ct) if ct else None,
            user_known_hosts=[_expand_path(p, tokens) for p in ukh if p.lower() != "none"],
            global_known_hosts=[_expand_path(p, tokens) for p in gkh if p.lower() != "none"],
            host_key_alias=str(opts["hostkeyalias"]) if opts.get("hostkeyalias") else None,
            hash_known_hosts=_yes(opts.get("hashknownhosts")),
            accept_new=self.accept_new or strict in ("accept-new", "no", "off"),
        )

    def local_user(self) -> str:
        """The local login name, looked up once per run (getpass may read the passwd database)."""
        if self._local_user is None:
            try:
                self._local_user = getpass.getuser()
            except (OSError, KeyError) as exc:
                raise SSHError("config", f"cannot tell the local user name: {exc}") from exc
        return self._local_user

    def _lookup(self, alias: str, user: str | None, port: int | None) -> Any:
        """Config lookup; a user or port given on the host line wins over the config, as `ssh -l/-p` do,
        and is what %r/%p expand to in ProxyCommand/ProxyJump."""
        private = getattr(self.config, "_lookup", None)
        if (user is None and port is None) or private is None:
            return self.config.lookup(alias)
        try:
            seed = paramiko.SSHConfigDict()
            if port is not None:
                seed["port"] = str(port)
            if user:
                seed["user"] = user
            first = private(alias, seed)
            if "hostname" not in first:
                first["hostname"] = alias
            return private(alias, first, canonical=False, final=True)
        except TypeError:  # a paramiko whose private API changed
            return self.config.lookup(alias)

    def key_file(self, path: str) -> paramiko.PKey | str:
        """A loaded private key, or a one-line reason it cannot be used (cached per run)."""
        with self._key_lock:
            cached = self._keys.get(path)
        if cached is not None:
            return cached
        result: paramiko.PKey | str
        try:
            result = paramiko.PKey.from_path(path)
        except FileNotFoundError:
            result = "missing"
        except paramiko.PasswordRequiredException:
            result = f"{path} is passphrase-protected: load it into ssh-agent"
        except Exception as exc:  # unknown key types, corrupt files
            result = f"{path} cannot be used: {exc}"
        with self._key_lock:
            self._keys[path] = result
        return result


_default_context: SSHContext | None = None
_default_lock = threading.Lock()


def default_context() -> SSHContext:
    global _default_context
    with _default_lock:
        if _default_context is None:
            # For `--host user@host` on single-host commands; fleet-audit has options for these.
            _default_context = SSHContext(
                os.environ.get("BSDCRYPT_SSH_CONFIG") or None,
                accept_new=os.environ.get("BSDCRYPT_ACCEPT_NEW") == "1",
            )
        return _default_context


def _public_blob_of_file(path: str) -> bytes | None:
    try:
        fields = Path(path + ".pub").read_text(encoding="utf-8").split()
        return base64.b64decode(fields[1]) if len(fields) >= 2 else None
    except (OSError, ValueError):
        return None
