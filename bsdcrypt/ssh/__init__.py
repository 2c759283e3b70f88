"""SSH hosts: one TCP connection, one SSH session, one exec per `run` (paramiko lives only here).

`SSHHost.run(script)` execs `/bin/sh -s` (no pty) and sends the script on stdin, so it works
whatever the remote login shell is (root's shell is csh/tcsh on older FreeBSD). The user's
OpenSSH client config is honoured for HostName, User, Port, IdentityFile, IdentitiesOnly,
ProxyJump, ProxyCommand, ConnectTimeout, UserKnownHostsFile, GlobalKnownHostsFile,
HostKeyAlias, HashKnownHosts and StrictHostKeyChecking (accept-new/no act as accept-new; a
changed key is never accepted). Authentication: ssh-agent, then key files; never passwords.

One `SSHContext` is shared by every host of a run: the config is parsed once, each
known_hosts file is loaded once, and key files are loaded once.

fleet-audit's hosts (`single_run`) are reached over bsdcrypt's own SSH client (direct.py: Curve25519
or P-256 ECDH, AES-GCM, public-key login, one exec) when the connection is plain TCP; through a
ProxyCommand or ProxyJump, or with a server that shares none of those algorithms, paramiko's
message loop does the same (oneshot.py). Everything else goes through paramiko's Transport.
"""

import importlib
import importlib.util
import sys
import types


class _Deferred(types.ModuleType):
    """Stands in sys.modules for a module until one of its attributes is used, then imports it."""

    def __getattr__(self, attr: str) -> object:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def _defer_invoke() -> None:
    """paramiko.config imports invoke at start-up (it pulls in asyncio and unittest.mock: 0.1-0.2 s
    here) and uses it only to run an ssh_config `Match exec` command, which bsdcrypt.ssh.config runs
    itself (`_MatchExec`, as ssh does): a stand-in keeps that import from happening; anything that
    still reaches for invoke gets the real module on first use. (importlib's LazyLoader would not do:
    `import` itself reads `__spec__`, which loads it.)"""
    global _stand_in
    if "invoke" in sys.modules or importlib.util.find_spec("invoke") is None:
        return
    _stand_in = _Deferred("invoke")
    sys.modules["invoke"] = _stand_in


def _drop_invoke_stand_in() -> None:
    """Once paramiko.config has imported it (and bsdcrypt.ssh.config has replaced paramiko.config.invoke),
    the stand-in leaves sys.modules, if it is still ours: anything else (`importlib.util.find_spec`,
    which raises on a module whose __spec__ is None, or a later `import invoke`) sees the real thing."""
    global _stand_in
    if _stand_in is not None and sys.modules.get("invoke") is _stand_in:
        del sys.modules["invoke"]
    _stand_in = None


_stand_in: types.ModuleType | None = None
_defer_invoke()

# ruff: noqa: E402 - these imports come after _defer_invoke, which must precede paramiko's
from bsdcrypt.ssh.config import (
    DEFAULT_GLOBAL_KNOWN_HOSTS,
    DEFAULT_IDENTITIES,
    DEFAULT_USER_KNOWN_HOSTS,
    SSHContext,
    Target,
    default_context,
)
from bsdcrypt.ssh.errors import SSHError
from bsdcrypt.ssh.host import DEFAULT_TIMEOUT, MAX_OUTPUT, MAX_PROXY_JUMPS, REMOTE_COMMAND, SSHHost
from bsdcrypt.ssh.knownhosts import KnownHosts, KnownKey, fingerprint, known_hosts_name

_drop_invoke_stand_in()  # paramiko.config is imported now

__all__ = [
    "DEFAULT_GLOBAL_KNOWN_HOSTS",
    "DEFAULT_IDENTITIES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_USER_KNOWN_HOSTS",
    "MAX_OUTPUT",
    "MAX_PROXY_JUMPS",
    "REMOTE_COMMAND",
    "KnownHosts",
    "KnownKey",
    "SSHContext",
    "SSHError",
    "SSHHost",
    "Target",
    "default_context",
    "fingerprint",
    "known_hosts_name",
]
