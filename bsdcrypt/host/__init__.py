"""Moved to bsdcrypt.hosts (base, local, open): this package re-exports the old names until every branch
has merged the move. New code imports bsdcrypt.hosts.*."""

from bsdcrypt.hosts.base import REMOTE_COMMAND, Host, RunResult, sh_quote, stdin_script
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.hosts.open import parse_host_spec

__all__ = ["REMOTE_COMMAND", "Host", "LocalHost", "RunResult", "parse_host_spec", "sh_quote", "stdin_script"]
