"""Logging in with public keys through paramiko's public calls (Agent, PKey.from_path, auth_publickey).

Keys are offered in ssh's order: the agent's (those an IdentityFile also holds are signed here, without
a round trip to the agent), then the IdentityFiles' that the agent lacks; each key once. paramiko signs
a key before the server says it would take it, so an agent key that refuses to sign (confirm-only, a
FIDO key waiting for a touch) ends paramiko's connection: the caller connects again and goes on with
the next key, as ssh moves on. Passwords are never used.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import paramiko

from bsdcrypt.ssh.errors import OPENSSH_HINT, SSHError, shown_names
from bsdcrypt.ssh.hostkeys import fingerprint
from bsdcrypt.ssh.settings import SSHContext, Target, public_line

Candidate = tuple[str, Any, bytes]  # (label, paramiko key, public blob)


@dataclass
class Attempt:
    """What the attempts at one host have learnt so far (they may span several connections)."""

    tried: list[str]
    notes: list[str]
    refused: set[bytes]  # agent keys that refused to sign: not offered again
    offered: set[bytes] = field(default_factory=set)  # keys the server has seen already

def authenticate(transport: paramiko.Transport, t: Target, ctx: SSHContext, attempt: Attempt,
                 remaining: Callable[[], float]) -> bool:
    """True once logged in; False when an agent key refused to sign (paramiko's connection is gone:
    connect again, that key is left out); SSHError when no key is accepted."""
    candidates, agent = key_candidates(t, ctx, attempt.notes)
    try:
        for label, key, blob in candidates:
            if blob in attempt.refused or blob in attempt.offered:
                continue
            attempt.tried.append(label)
            attempt.offered.add(blob)
            remaining()
            try:
                rest = transport.auth_publickey(t.user, key)
            except paramiko.BadAuthenticationType as exc:
                allowed = shown_names(exc.allowed_types) or "none"
                raise SSHError("auth", f"{t.user}@{t.hostname} port {t.port} does not accept public keys "
                               f"(allows: {allowed})") from exc
            except paramiko.AuthenticationException:
                continue
            except paramiko.SSHException:
                if isinstance(key, paramiko.AgentKey) and not transport.is_active():
                    attempt.notes.append(f"the agent refused to sign with {label}")
                    attempt.refused.add(blob)
                    return False
                raise
            if transport.is_authenticated():
                return True
            raise SSHError("auth", f"{t.user}@{t.hostname} wants more authentication ({shown_names(rest)})")
    finally:
        if agent is not None:
            agent.close()
    raise auth_refused(t, attempt.tried, attempt.notes)


def key_candidates(t: Target, ctx: SSHContext, notes: list[str]) -> tuple[list[Candidate], paramiko.Agent | None]:
    """The keys to offer, in ssh's order, each once; the agent connection to close afterwards."""
    file_keys: list[Candidate] = []
    file_blobs: set[bytes] = set()
    unloaded = False  # an IdentityFile whose private key cannot be read here (the agent may hold it)
    for path in t.identity_files:
        loaded = ctx.key_file(path)
        if isinstance(loaded, str):
            if loaded != "missing" and loaded not in notes:
                notes.append(loaded)
            pub = public_blob(path)
            if pub is not None:
                file_blobs.add(pub)
                unloaded = True
            continue
        blob = loaded.asbytes()
        file_keys.append((path, loaded, blob))
        file_blobs.add(blob)
    local = {c[2]: c for c in file_keys}
    agent: paramiko.Agent | None = None
    candidates: list[Candidate] = []
    # The agent is asked only when it can add a key: with IdentitiesOnly and every IdentityFile loaded
    # here, it holds nothing that may be offered.
    if t.use_agent and (not t.identities_only or unloaded) and os.environ.get("SSH_AUTH_SOCK"):
        try:
            agent = paramiko.Agent()
            for ak in agent.get_keys():
                blob = ak.asbytes()
                if t.identities_only and blob not in file_blobs:
                    continue
                if blob in local:
                    candidates.append(local[blob])
                    continue
                label = f"agent key {getattr(ak, 'comment', '') or fingerprint(blob)}"
                if ak.get_name().startswith("sk-"):
                    note = f"{label} is a FIDO (sk-) key, which the paramiko path cannot use ({OPENSSH_HINT})"
                    if note not in notes:
                        notes.append(note)
                    continue
                candidates.append((label, ak, blob))
        except (paramiko.SSHException, OSError) as exc:
            notes.append(f"ssh-agent unusable: {exc}")
    candidates += file_keys
    seen: set[bytes] = set()
    unique: list[Candidate] = []
    for cand in candidates:
        if cand[2] not in seen:
            seen.add(cand[2])
            unique.append(cand)
    return unique, agent


def auth_refused(t: Target, tried: list[str], notes: list[str]) -> SSHError:
    extra = f" ({'; '.join(notes)})" if notes else ""
    if not tried:
        return SSHError("no-keys", f"no SSH key to log in to {t.user}@{t.hostname}: no agent key and no "
                        f"usable IdentityFile{extra}")
    names = ", ".join(tried[:3]) + (f" and {len(tried) - 3} more" if len(tried) > 3 else "")
    return SSHError("auth", f"authentication refused for {t.user}@{t.hostname} (tried {names}){extra}")


def public_blob(path: str) -> bytes | None:
    """The public key blob of the `.pub` file beside a key file, if any."""
    line = public_line(path)
    fields = line.split() if line else []
    try:
        return base64.b64decode(fields[1]) if len(fields) >= 2 else None
    except ValueError:
        return None
