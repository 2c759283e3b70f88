"""SSH hosts (paramiko lives only here): no SSH protocol code of bsdcrypt's own.

Two paths run `/bin/sh -s` on a host with the script on stdin (so it works whatever root's login shell
is, csh/tcsh included):

client.py     SSHHost, `--ssh paramiko` (the default): paramiko's public API, in this process
openssh.py    OpenSSHHost, `--ssh openssh`: the system ssh client, one process per host
settings.py   a host's ssh_config (`ssh -G`, or paramiko's SSHConfig where ssh is missing), SSHContext
includes.py   ssh_config `Include` expansion and checked values (for paramiko's SSHConfig)
hostkeys.py   known_hosts (plain, hashed, patterns, @revoked, @cert-authority)
auth.py       public-key login: agent, then key files, in ssh's order
sockets.py    TCP and ProxyCommand sockets with a byte budget
files.py      regular, bounded reads of the user's ssh files
"""

from bsdcrypt.ssh.client import MAX_PROXY_JUMPS, SSHHost
from bsdcrypt.ssh.errors import OPENSSH_HINT, SSHError
from bsdcrypt.ssh.hostkeys import KnownHosts, KnownKey, fingerprint, known_hosts_name
from bsdcrypt.ssh.limits import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, MAX_OUTPUT
from bsdcrypt.ssh.settings import (
    DEFAULT_GLOBAL_KNOWN_HOSTS,
    DEFAULT_IDENTITIES,
    DEFAULT_USER_KNOWN_HOSTS,
    SSHContext,
    Target,
    default_context,
)

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_GLOBAL_KNOWN_HOSTS",
    "DEFAULT_IDENTITIES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_USER_KNOWN_HOSTS",
    "MAX_OUTPUT",
    "MAX_PROXY_JUMPS",
    "OPENSSH_HINT",
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
