"""The OpenSSH client config applied to one host (`Target`), and what every host of a run shares
(`SSHContext`: the config, known_hosts, loaded keys, policy).

A host's settings are OpenSSH's own: `ssh -G` prints them (Match, Include, CanonicalizeHostname,
tokens and defaults exactly as ssh reads them) wherever the ssh client is installed (FreeBSD's base
system has it). Where it is not, paramiko's public SSHConfig reads the config, after bsdcrypt.ssh.includes
expanded its `Include` lines. Either way the config files are read first by bsdcrypt.ssh.includes,
regular files only (a FIFO where a config should be is one line, never a hang).

What the paramiko path cannot honour (a CertificateFile, an IdentityAgent other than $SSH_AUTH_SOCK)
is kept in `Target.unsupported`: the host is refused with a line naming `--ssh openssh`, never
connected to with less than the config asks.
"""

from __future__ import annotations

import dataclasses
import getpass
import io
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paramiko

from bsdcrypt.hostspec import SpecError, split_spec
from bsdcrypt.ssh.errors import SSHError
from bsdcrypt.ssh.hostkeys import KnownHosts, known_hosts_name
from bsdcrypt.ssh.includes import parse_port, parse_seconds, read_config, system_config

DEFAULT_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ed25519")
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
MAX_SSH_G_OUTPUT = 1 << 20  # what `ssh -G` may print (a real one: ~3 KB)
# ssh_config keywords of algorithm lists, as ssh -G names them -> Target field
ALGORITHM_KEYS = {"kexalgorithms": "kex", "ciphers": "ciphers", "macs": "macs",
                  "hostkeyalgorithms": "host_key_algorithms", "pubkeyacceptedalgorithms": "pubkey_algorithms",
                  "pubkeyacceptedkeytypes": "pubkey_algorithms"}


@dataclass(frozen=True)
class Target:
    """Where and how to connect, after the client config was applied."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    identities_only: bool
    proxy_jump: str | None
    proxy_command: str | None
    connect_timeout: float | None
    user_known_hosts: tuple[str, ...]
    global_known_hosts: tuple[str, ...]
    host_key_alias: str | None
    hash_known_hosts: bool
    accept_new: bool
    use_agent: bool = True
    # algorithm lists as the config gives them (None: the client's defaults; ssh -G gives final lists,
    # paramiko's SSHConfig may give `+x`, `-x`, `^x` forms)
    kex: str | None = None
    ciphers: str | None = None
    macs: str | None = None
    host_key_algorithms: str | None = None
    pubkey_algorithms: str | None = None
    unsupported: tuple[str, ...] = ()  # what the paramiko path cannot honour for this host

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
        values = [getattr(self, f.name) for f in dataclasses.fields(self)][1:]
        values[0] = str(values[0]).lower()
        return tuple(values)


def _expand_path(path: str, tokens: dict[str, str]) -> str:
    if "%" in path:
        path = percent_expand(path, tokens, f"path {path[:60]!r}")
    return os.path.expanduser(path)


def percent_expand(value: str, tokens: dict[str, str], what: str) -> str:
    """ssh's percent_expand: one pass, so a value's own `%` never expands again; unknown tokens are errors."""

    def one(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in tokens:
            raise SSHError("config", f"{what}: unknown token %{key} (bsdcrypt expands: "
                           + ", ".join("%" + k for k in tokens) + "); use --ssh openssh")
        return tokens[key]

    if value.endswith("%") and not value.endswith("%%"):
        raise SSHError("config", f"{what}: a lone % at the end")
    return re.sub(r"%(.)", one, value)


def _yes(value: object) -> bool:
    return str(value or "").strip().lower() in ("yes", "true", "on")


def _none(value: object) -> str | None:
    text = str(value or "").strip()
    return None if not text or text.lower() == "none" else text


_PLAIN_NAME = re.compile(r"^[a-z0-9_.:-]+$")
_NOT_PLAIN = re.compile(r"^\s*(match|canonical\w*)\b|%|^\s*host\s.*[\[\]]", re.IGNORECASE | re.MULTILINE)


def plain_config(text: str) -> bool:
    """A config whose answer for a host depends only on which `Host` blocks match its name: no Match,
    no canonicalisation, no %-token anywhere, no `[...]` in a Host pattern (fnmatch and ssh differ there)."""
    return _NOT_PLAIN.search(text) is None


def find_ssh() -> str | None:
    """The system's ssh client, if installed (the environment may name another: BSDCRYPT_SSH)."""
    return os.environ.get("BSDCRYPT_SSH") or shutil.which("ssh")


class Lookup:
    """One `ssh -G` in flight, which another thread may kill (a host given up, Ctrl-C)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed = False

    def kill(self) -> None:
        self.killed = True
        proc = self.proc
        if proc is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # its Match exec commands too
            except OSError:
                pass


def ssh_g(ssh: str, config_path: str | None, alias: str, user: str | None, port: int | None,
          deadline: float, lookup: Lookup | None = None) -> dict[str, list[str]]:
    """What `ssh -G` prints for a host: keyword -> its values (in order; a keyword may repeat)."""
    argv = [ssh, "-G"]
    if config_path:
        argv += ["-F", config_path]
    if port is not None:
        argv += ["-p", str(port)]
    if user:
        argv += ["-l", user]
    argv += ["--", alias]
    lookup = lookup or Lookup()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as exc:
        raise SSHError("config", f"cannot run {ssh} -G: {exc.strerror or exc}") from exc
    lookup.proc = proc
    if lookup.killed:
        lookup.kill()
    try:
        out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        lookup.kill()
        proc.communicate()
        raise SSHError("timeout", f"`ssh -G {alias}` did not finish in time (a slow Match exec?)") from None
    if lookup.killed:
        raise SSHError("timeout", f"`ssh -G {alias}` was stopped (the host's time ran out)")
    if proc.returncode != 0 or len(out) > MAX_SSH_G_OUTPUT:
        said = [ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
        said = [ln for ln in said if "Pseudo-terminal" not in ln]
        named = [ln for ln in said if " line " in ln and "terminating" not in ln]  # "FILE line N: Bad port"
        why = "; ".join(named[:2]) if named else (said[-1] if said else f"exit status {proc.returncode}")
        raise SSHError("config", f"the ssh config for {alias} is refused by ssh: {why[:200]}")
    values: dict[str, list[str]] = {}
    for line in out.decode("utf-8", "surrogateescape").splitlines():
        key, _, value = line.partition(" ")
        values.setdefault(key.lower(), []).append(value)
    return values


@dataclass
class SSHContext:
    """What every host of one run shares: config, known_hosts, loaded keys, policy.

    `ssh`: the ssh client whose `-G` resolves hosts; None uses paramiko's SSHConfig (the default: the
    one found on PATH; pass `ssh=""` to force paramiko's reading)."""

    config_path: str | None = None
    accept_new: bool = False
    use_agent: bool = True
    ssh: str | None = field(default=None)
    config: paramiko.SSHConfig | None = field(init=False, default=None)
    known_hosts: KnownHosts = field(init=False, default_factory=KnownHosts)
    files: list[tuple[str, bool]] = field(init=False, default_factory=list)  # (config file, is a user's)
    _keys: dict[str, paramiko.PKey | str] = field(init=False, default_factory=dict)
    _key_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _local_user: str | None = field(init=False, default=None)
    _targets: dict[tuple[str, str | None, int | None], Target] = field(init=False, default_factory=dict)
    _target_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    # A config of plain `Host` blocks only (plain_config): aliases that its blocks treat alike get the same
    # `ssh -G` answer but for their name, so one `ssh -G` serves them all (a process is ~7 ms of CPU a host).
    _shapes: paramiko.SSHConfig | None = field(init=False, default=None)
    _answers: dict[Hashable, dict[str, list[str]]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.ssh is None:
            self.ssh = find_ssh()
        if self.config_path is not None:
            path = os.path.expanduser(self.config_path)
            if not os.path.exists(path):
                raise SSHError("config", f"no ssh config file at {self.config_path}")
            self.config_path = os.path.abspath(path)
            self.files = [(self.config_path, True)]  # like ssh -F: a user config (relative Includes from ~/.ssh)
        else:
            candidates = ((os.path.expanduser("~/.ssh/config"), True), (system_config(), False))
            self.files = [(p, user) for p, user in candidates if os.path.lexists(p)]
        texts = [read_config(path, user) for path, user in self.files]  # every file checked: regular, bounded
        if self.ssh and all(plain_config(t) for t in texts):
            self._shapes = paramiko.SSHConfig()
            for text in texts:
                try:
                    self._shapes.parse(io.StringIO(text))
                except Exception:  # ssh -G says what is wrong, host by host
                    self._shapes = None
                    break
        if not self.ssh:
            self.config = paramiko.SSHConfig()
            for (path, _), text in zip(self.files, texts, strict=True):
                try:
                    self.config.parse(io.StringIO(text))
                except Exception as exc:  # paramiko raises bare exceptions on odd syntax
                    raise SSHError("config", f"cannot use ssh config {path}: {str(exc)[:200]}") from exc

    def target(self, alias: str, user: str | None = None, port: int | None = None,
               deadline: float | None = None, lookup: Lookup | None = None) -> Target:
        """The config applied to a host, looked up once per run. The Target is shared (frozen)."""
        key = (alias, user, port)
        with self._target_lock:
            cached = self._targets.get(key)
        if cached is None:
            if deadline is None:
                deadline = time.monotonic() + 30.0
            cached = self._from_ssh_g(alias, user, port, deadline, lookup) if self.ssh else \
                self._from_paramiko(alias, user, port)
            with self._target_lock:
                cached = self._targets.setdefault(key, cached)
        return cached

    def _from_ssh_g(self, alias: str, user: str | None, port: int | None, deadline: float,
                    lookup: Lookup | None) -> Target:
        assert self.ssh
        shape = self._shape(alias, user, port)
        with self._target_lock:
            known = self._answers.get(shape) if shape is not None else None
        if known is not None:  # the same blocks apply: ssh's answer but for the name
            g = dict(known, host=[alias], hostname=[alias])
        else:
            g = ssh_g(self.ssh, self.config_path, alias, user, port, deadline, lookup)
            if shape is not None and g.get("hostname") == [alias] and g.get("host") == [alias]:
                with self._target_lock:
                    self._answers.setdefault(shape, g)

        def one(key: str) -> str | None:
            return g.get(key, [None])[0]

        hostname = one("hostname") or alias
        the_port = parse_port(one("port") or "22") or 22
        the_user = one("user") or user or self.local_user()
        tokens = self._tokens(alias, hostname, the_port, the_user)
        algorithms = {field_: _none(one(key)) for key, field_ in ALGORITHM_KEYS.items() if key in g}
        return self._make(
            alias, hostname, the_port, the_user, tokens,
            identity_files=g.get("identityfile", []),
            certificate_files=g.get("certificatefile", []),
            identities_only=_yes(one("identitiesonly")),
            proxy_jump=_none(one("proxyjump")),
            proxy_command=_none(one("proxycommand")),
            connect_timeout=_none(one("connecttimeout")),
            user_known_hosts=" ".join(g.get("userknownhostsfile", [])),
            global_known_hosts=" ".join(g.get("globalknownhostsfile", [])),
            host_key_alias=_none(one("hostkeyalias")),
            hash_known_hosts=_yes(one("hashknownhosts")),
            strict=str(one("stricthostkeychecking") or ""),
            identity_agent=_none(one("identityagent")),
            algorithms=algorithms,
        )

    def _shape(self, alias: str, user: str | None, port: int | None) -> Hashable | None:
        """What decides ssh -G's answer for `alias` under a plain config: the values its Host blocks give
        (paramiko's SSHConfig matches Host patterns as ssh does: `*`, `?`, `!`), with the user and port
        given; None where that is not certain (a name ssh would lowercase, or one HostName renames)."""
        if self._shapes is None or alias != alias.lower() or not _PLAIN_NAME.match(alias):
            return None
        try:
            opts = dict(self._shapes.lookup(alias))
        except Exception:
            return None
        if opts.pop("hostname", alias) != alias:
            return None
        return (tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in opts.items())), user, port)

    def _from_paramiko(self, alias: str, user: str | None, port: int | None) -> Target:
        assert self.config is not None
        try:
            opts: dict[str, Any] = dict(self.config.lookup(alias))
        except Exception as exc:  # Match exec without invoke installed, and the like
            raise SSHError("config", f"ssh config lookup for {alias} failed: {str(exc)[:200]}") from exc
        hostname = str(opts.get("hostname") or alias)
        the_port = port if port is not None else parse_port(str(opts.get("port", 22)))
        if the_port is None:
            raise SSHError("config", f"ssh config: bad port {str(opts.get('port'))[:40]!r} for {alias}")
        the_user = user or str(opts.get("user") or "") or self.local_user()
        tokens = self._tokens(alias, hostname, the_port, the_user)
        algorithms = {field_: _none(opts.get(key)) for key, field_ in ALGORITHM_KEYS.items() if key in opts}
        ids = opts.get("identityfile") or list(DEFAULT_IDENTITIES)
        return self._make(
            alias, hostname, the_port, the_user, tokens,
            identity_files=[str(p) for p in ids],
            certificate_files=[str(p) for p in opts.get("certificatefile") or []],
            identities_only=_yes(opts.get("identitiesonly")),
            proxy_jump=_none(opts.get("proxyjump")),
            proxy_command=_none(opts.get("proxycommand")),
            connect_timeout=_none(opts.get("connecttimeout")),
            user_known_hosts=str(opts.get("userknownhostsfile") or " ".join(DEFAULT_USER_KNOWN_HOSTS)),
            global_known_hosts=str(opts.get("globalknownhostsfile") or " ".join(DEFAULT_GLOBAL_KNOWN_HOSTS)),
            host_key_alias=_none(opts.get("hostkeyalias")),
            hash_known_hosts=_yes(opts.get("hashknownhosts")),
            strict=str(opts.get("stricthostkeychecking") or ""),
            identity_agent=_none(opts.get("identityagent")),
            algorithms=algorithms,
        )

    def _tokens(self, alias: str, hostname: str, port: int, user: str) -> dict[str, str]:
        return {"d": str(Path.home()), "h": hostname, "p": str(port), "r": user, "u": self.local_user(),
                "n": alias, "i": str(os.getuid()), "%": "%"}

    def _make(self, alias: str, hostname: str, port: int, user: str, tokens: dict[str, str], *,
              identity_files: list[str], certificate_files: list[str], identities_only: bool,
              proxy_jump: str | None, proxy_command: str | None, connect_timeout: str | None,
              user_known_hosts: str, global_known_hosts: str, host_key_alias: str | None,
              hash_known_hosts: bool, strict: str, identity_agent: str | None,
              algorithms: dict[str, str | None]) -> Target:
        unsupported: list[str] = []
        if certificate_files:
            unsupported.append(f"CertificateFile {certificate_files[0][:80]}")
        use_agent = self.use_agent
        if identity_agent is not None:
            agent = identity_agent
            if agent == "SSH_AUTH_SOCK" or agent == "$SSH_AUTH_SOCK":
                pass
            elif agent.lower() == "none":
                use_agent = False
            elif os.path.expanduser(agent) != os.environ.get("SSH_AUTH_SOCK"):
                unsupported.append(f"IdentityAgent {agent[:80]}")
        if proxy_command is not None:
            proxy_command = percent_expand(proxy_command, tokens, f"ProxyCommand for {alias}")
        seconds = parse_seconds(connect_timeout) if connect_timeout else None
        strict = strict.lower()
        return Target(
            alias=alias,
            hostname=hostname,
            port=port,
            user=user,
            identity_files=tuple(_expand_path(p, tokens) for p in identity_files),
            identities_only=identities_only,
            proxy_jump=proxy_jump,
            proxy_command=proxy_command,
            connect_timeout=float(seconds) if seconds else None,
            user_known_hosts=tuple(_expand_path(p, tokens) for p in user_known_hosts.split() if p.lower() != "none"),
            global_known_hosts=tuple(_expand_path(p, tokens) for p in global_known_hosts.split()
                                     if p.lower() != "none"),
            host_key_alias=host_key_alias,
            hash_known_hosts=hash_known_hosts,
            accept_new=self.accept_new or strict in ("accept-new", "no", "off", "false"),
            use_agent=use_agent,
            unsupported=tuple(unsupported),
            **algorithms,
        )

    def local_user(self) -> str:
        """The local login name, looked up once per run (getpass may read the passwd database)."""
        if self._local_user is None:
            try:
                self._local_user = getpass.getuser()
            except (OSError, KeyError) as exc:
                raise SSHError("config", f"cannot tell the local user name: {exc}") from exc
        return self._local_user

    def key_file(self, path: str) -> paramiko.PKey | str:
        """A loaded private key (with its `-cert.pub` certificate when one lies beside it, as ssh loads it),
        or a one-line reason it cannot be used (cached per run)."""
        with self._key_lock:
            cached = self._keys.get(path)
        if cached is not None:
            return cached
        result: paramiko.PKey | str = _load_key(path)
        with self._key_lock:
            self._keys[path] = result
        return result


def _load_key(path: str) -> paramiko.PKey | str:
    if not os.path.isfile(path):
        return "missing"
    pub = public_line(path)
    if pub is not None and pub.split(None, 1)[0].startswith("sk-"):
        return f"{path} is a FIDO (sk-) key, which the paramiko path cannot use: use --ssh openssh"
    try:
        key = paramiko.PKey.from_path(path)
    except paramiko.PasswordRequiredException:
        return f"{path} is passphrase-protected: load it into ssh-agent"
    except Exception as exc:  # unknown key types, corrupt files
        return f"{path} cannot be used: {str(exc)[:120]}"
    cert = path + "-cert.pub"
    if os.path.isfile(cert):
        try:
            key.load_certificate(cert)
        except Exception as exc:
            return f"{cert} cannot be used: {str(exc)[:120]}"
    return key


def public_line(path: str) -> str | None:
    """The first line of the `.pub` file beside a key, if any (small: 64 KiB at most)."""
    from bsdcrypt.ssh.files import read_regular

    try:
        data = read_regular(path + ".pub", 1 << 16, "public key")
    except SSHError:
        return None
    if not data:
        return None
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else None


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


def choose(wanted: str | None, available: tuple[str, ...]) -> list[str]:
    """An algorithm list of the config (`a,b`, `+a`, `-a`, `^a`; ssh -G gives plain lists) applied to
    what paramiko has, in the config's order; [] when none of them is there."""
    if wanted is None:
        return list(available)
    from fnmatch import fnmatchcase

    names = [w for w in wanted[1:].split(",") if w] if wanted[:1] in "+-^" and wanted else []
    if wanted.startswith("+"):  # paramiko's defaults are all it has: nothing to add
        return list(available)
    if wanted.startswith("-"):
        return [a for a in available if not any(fnmatchcase(a, n) for n in names)]
    if wanted.startswith("^"):
        first = [n for n in names if n in available]
        return first + [a for a in available if a not in first]
    out: list[str] = []
    for name in wanted.split(","):
        out += [a for a in available if fnmatchcase(a, name) and a not in out]
    return out


def parse_hop(hop: str) -> tuple[str | None, str, int | None]:
    """A ProxyJump hop, `[user@]host[:port]` or `ssh://[user@]host[:port]`, as ssh reads it (misc.c,
    parse_user_host_port): `[name]:port` brackets any host, IPv4 and names too."""
    text = hop.removeprefix("ssh://")
    user, _, rest = text.rpartition("@")
    port: int | None = None
    if rest.startswith("[") and "]" in rest:
        name, _, tail = rest[1:].partition("]")
        if tail:
            if not tail.startswith(":") or not tail[1:].isdigit() or not 1 <= int(tail[1:]) <= 65535:
                raise SSHError("config", f"bad ProxyJump {hop[:80]!r}: bad port")
            port = int(tail[1:])
        try:
            split_spec(name if ":" in name else f"{user + '@' if user else ''}{name}")
        except SpecError as exc:
            raise SSHError("config", f"bad ProxyJump {hop[:80]!r}: {exc}") from exc
    else:
        try:
            user_, name, port = split_spec(text)
        except SpecError as exc:
            raise SSHError("config", f"bad ProxyJump {hop[:80]!r}: {exc}") from exc
        user = user_ or ""
    return user or None, name, port
