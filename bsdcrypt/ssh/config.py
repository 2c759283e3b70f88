"""The run context: the OpenSSH client config applied to a host (`Target`), and key files."""

from __future__ import annotations

import base64
import getpass
import os
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
        return known_hosts_name(self.host_key_alias or self.hostname, self.port)


def _expand_path(path: str, target: dict[str, str]) -> str:
    if "%" not in path:  # nothing to substitute (the common case): skip the token table
        return os.path.expanduser(path)
    for token, value in (("%d", str(Path.home())), ("%h", target["h"]), ("%p", target["p"]),
                         ("%r", target["r"]), ("%u", target["u"]), ("%%", "%")):
        path = path.replace(token, value)
    return os.path.expanduser(path)


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() in ("yes", "true", "on")


class _SSHConfig(paramiko.SSHConfig):
    """paramiko's SSHConfig, minus a per-host cost: `_tokenize` looks up the local user, host name
    and home folder and hashes them for every value of every lookup, even when the value holds
    no token. Every token starts with `%` or is `~`, so a value with neither is returned as is;
    values with tokens still go through paramiko."""

    def _tokenize(self, config: Any, target_hostname: str, key: str, value: Any) -> Any:
        if isinstance(value, str) and "%" not in value and "~" not in value:
            return value
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

    def __post_init__(self) -> None:
        self.config = _SSHConfig()
        paths: list[str]
        if self.config_path is not None:
            path = os.path.expanduser(self.config_path)
            if not os.path.isfile(path):
                raise SSHError("config", f"no ssh config file at {self.config_path}")
            paths = [path]
        else:
            candidates = (os.path.expanduser("~/.ssh/config"), "/etc/ssh/ssh_config")
            paths = [p for p in candidates if os.path.isfile(p)]
        for path in paths:
            try:
                with open(path, encoding="utf-8") as fh:
                    self.config.parse(fh)
            except (OSError, UnicodeDecodeError, paramiko.ConfigParseError) as exc:
                raise SSHError("config", f"cannot use ssh config {path}: {exc}") from exc
            except Exception as exc:  # paramiko raises bare exceptions on odd syntax
                raise SSHError("config", f"cannot parse ssh config {path}: {exc}") from exc

    def target(self, alias: str, user: str | None = None, port: int | None = None) -> Target:
        try:
            opts: dict[str, Any] = dict(self._lookup(alias, user, port))
        except Exception as exc:  # Match exec failures and the like
            raise SSHError("config", f"ssh config lookup for {alias} failed: {exc}") from exc
        hostname = str(opts.get("hostname") or alias)
        the_port = port if port is not None else int(opts.get("port", 22))
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
        ct = opts.get("connecttimeout")
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
            connect_timeout=float(ct) if ct and str(ct).isdigit() and int(ct) > 0 else None,
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
