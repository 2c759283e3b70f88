"""Ingest probe output that another engine collected, and assess it like `status` would.

`bsdcrypt probe-script` prints the probe with a fixed, documented token. Whatever runs it on the
hosts (Ansible, Salt, cron + rsync, a serial console) hands the output back to `bsdcrypt analyze`,
which accepts, per file, one of:

* raw probe output (what `sh probe.sh` printed), also as captured through a pty (CRLF);
* Ansible's JSON stdout callback output (`ANSIBLE_STDOUT_CALLBACK=json`, `ansible` or
  `ansible-playbook`): plays[].tasks[].hosts[HOST] with `stdout` from the `script` or `raw` module;
  unreachable and failed hosts become `unknown` rows naming the reason;
* the files of `ansible --tree DIR` (one JSON result per host, named after the host);
* a bsdcrypt recording (`bsdcrypt record`);
* a paste of command outputs: a bare dmesg.boot, or dmesg + `kldstat -v` + `uname -a` + `geli list` +
  loader.conf in any order, with or without shell prompts (bsdcrypt.collect.paste). Only what was pasted is
  known: every other field stays unknown, and a `paste-partial` finding says which outputs were missing.

The token is read from the first frame, so a script made with `probe-script --token` works too.
Every host then goes through the same `assess()` as `bsdcrypt status`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bsdcrypt.assess import assess
from bsdcrypt.errors import BsdcryptError, CutOff, ProbeError, collect_remedy
from bsdcrypt.probe import MODULE_FILES, Evidence, StepName, exists_step, parse_output
from bsdcrypt.status import Finding, Status

STANDALONE_TOKEN = "@@bsdcrypt-standalone"
_FRAME = re.compile(rb"^(@@bsdcrypt-[A-Za-z0-9_.:-]+) begin (\S+)\r?$", re.M)
_RECORDING = re.compile(rb"^bsdcrypt_recording:", re.M)
_TREE_KEYS = frozenset({"stdout", "unreachable", "failed", "skipped", "rc"})
LAST_STEP = exists_step(MODULE_FILES[-1])  # the probe's final step: without it, the output was cut off

@dataclass
class Collected:
    """One host's result from an input file: evidence, or why there is none."""

    target: str  # the name the engine knows the host by (inventory name), or the file
    origin: str  # FILE, or FILE#HOST for an engine's multi-host output
    source: str  # Status.source: "file:PATH", "ansible:PATH", "replay:PATH"
    evidence: Evidence | None = None
    error_kind: str | None = None
    error: str | None = None
    unrecognised: bool = False  # none of the accepted kinds at all (a README, a report): skippable in a folder


def _strip_pty(data: bytes) -> bytes:
    """Undo a pty's onlcr (\\n -> \\r\\n) when every line ends in \\r\\n; leave anything else alone."""
    if b"\r\n" in data and data.count(b"\n") == data.count(b"\r\n"):
        return data.replace(b"\r\n", b"\n")
    return data


def find_token(data: bytes) -> str | None:
    m = _FRAME.search(data)
    return m.group(1).decode() if m else None


def parse_probe_output(data: bytes, token: str | None = None) -> Evidence:
    """Raw probe output -> Evidence; ProbeError if there are no frames or the output was cut off."""
    data = _strip_pty(data)
    token = token or find_token(data)
    if token is None:
        raise ProbeError("no bsdcrypt probe frames found")
    evidence = parse_output(data, token)
    if LAST_STEP not in evidence.steps:
        raise CutOff(f"the probe output ends after {len(evidence.steps)} steps, before its last one")
    return evidence


def host_name(evidence: Evidence, fallback: str) -> str:
    """The host's own name: kern.hostname, else uname -a's second field, else the fallback."""
    for line in (evidence.text(StepName.SYSCTL) or "").splitlines():
        if line.startswith("kern.hostname:"):
            name = line.split(":", 1)[1].strip()
            if name:
                return name
    fields = (evidence.text(StepName.UNAME_A) or "").split()
    if len(fields) >= 2:
        return fields[1]
    return fallback


def from_bytes(data: bytes, target: str, origin: str, source: str, token: str | None) -> Collected:
    try:
        return Collected(target, origin, source, parse_probe_output(data, token))
    except ProbeError as exc:  # cut-off or garbage
        return Collected(target, origin, source, error_kind=exc.kind, error=str(exc))


def _items(value: Any, kind: type) -> Any:
    """`value` if it is of the JSON kind Ansible writes there, else an empty one: a document of another
    shape (`{"plays": 5}`) has no host results, it does not crash the run."""
    return value if isinstance(value, kind) else kind()


def _ansible_results(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for play in _items(doc.get("plays"), list):
        for task in _items(_items(play, dict).get("tasks"), list):
            for host, result in _items(_items(task, dict).get("hosts"), dict).items():
                if isinstance(result, dict):
                    yield str(host), result


def _ansible(doc: dict[str, Any], path: str, token: str | None) -> list[Collected]:
    """Per host, the last task result holding probe frames; else the reason it has none."""
    best: dict[str, Collected] = {}
    for host, result in _ansible_results(doc):
        origin, source = f"{path}#{host}", f"ansible:{path}"
        stdout = result.get("stdout")
        if isinstance(stdout, str) and _FRAME.search(_strip_pty(stdout.encode("utf-8", "replace"))):
            got = from_bytes(stdout.encode("utf-8", "replace"), host, origin, source, token)
            rc = result.get("rc")
            if got.evidence is not None and isinstance(rc, int) and rc != 0:
                got = Collected(host, origin, source, error_kind="cut-off",
                                error=f"the probe exited with status {rc} (it always ends with exit 0)")
            best[host] = got
            continue
        if host in best and best[host].evidence is not None:
            continue  # a later unrelated task does not hide the probe's result
        msg = " ".join(str(result.get("msg") or result.get("stderr") or "").split())[:300]
        if result.get("unreachable"):
            best[host] = Collected(host, origin, source, error_kind="unreachable", error=msg or "unreachable")
        elif result.get("failed"):
            best[host] = Collected(host, origin, source, error_kind="failed", error=msg or "the task failed")
        elif result.get("skipped"):
            best.setdefault(host, Collected(host, origin, source, error_kind="skipped", error=msg or "skipped"))
        else:
            best.setdefault(host, Collected(host, origin, source, error_kind="garbage",
                                            error="the task's stdout holds no bsdcrypt probe output"))
    return list(best.values())


def collect_file(path: str, data: bytes, token: str | None = None) -> list[Collected]:
    """Everything one input file holds (one host for raw output and recordings, many for Ansible).

    Content that is none of the accepted kinds becomes one `garbage` row, never an exception, so
    one bad file does not hide the rest of a fleet; `unrecognised` marks the rows of files that are
    not collected output at all (text without probe frames, JSON not from Ansible), which `analyze
    DIR` skips. An empty file stays a row: the engine collected nothing for that host.
    """

    def garbage(why: str, unrecognised: bool = False) -> list[Collected]:
        return [Collected(path, path, f"file:{path}", error_kind="garbage", error=why, unrecognised=unrecognised)]

    if not data.strip():
        return garbage("the file is empty: the engine collected no output")
    if data.lstrip()[:1] == b"{":
        try:
            doc = json.loads(data.decode("utf-8", "replace"))
        except ValueError as exc:
            return garbage(f"looks like JSON but is not valid: {exc}")
        except RecursionError:  # `[[[[...` nested deeper than Python's parser goes
            return garbage("looks like JSON but is nested too deep to be Ansible's output")
        if isinstance(doc, dict) and "plays" not in doc and _TREE_KEYS & set(doc):
            # `ansible --tree DIR`: one file per host, named after it, holding that host's result
            doc = {"plays": [{"tasks": [{"hosts": {Path(path).name: doc}}]}]}
        if not isinstance(doc, dict) or "plays" not in doc:
            return garbage("JSON neither from Ansible's json callback nor from ansible --tree", unrecognised=True)
        return _ansible(doc, path, token) or garbage("the Ansible output has no host results")
    if _FRAME.search(_strip_pty(data)) or token:
        return [from_bytes(data, path, path, f"file:{path}", token)]
    if _RECORDING.search(data):  # the key may follow long `# source:` headers
        from bsdcrypt.recording import load_text

        try:
            doc, evidence = load_text(data.decode("utf-8", "replace"), path)
        except BsdcryptError as exc:
            return garbage(str(exc))
        return [Collected(str(doc.get("host") or Path(path).stem), path, f"replay:{path}", evidence)]
    from bsdcrypt.collect.paste import evidence_from_paste

    pasted = evidence_from_paste(data.decode("utf-8", "replace"))
    if pasted is not None:
        return [Collected(path, path, f"paste:{path}", pasted)]
    return garbage(
        "neither bsdcrypt probe output, Ansible JSON output, a bsdcrypt recording nor pasted dmesg, kldstat, "
        "uname -a or geli list output",
        unrecognised=True,
    )


def to_status(c: Collected) -> Status:
    if c.evidence is not None:
        fallback = c.target if c.source.startswith("ansible:") else Path(c.target).stem
        name = c.target if c.source.startswith("ansible:") else host_name(c.evidence, fallback)
        return assess(c.evidence, name, c.source)
    status = Status(host=c.target, source=c.source)
    kind = c.error_kind or "garbage"
    remedy = collect_remedy(kind)
    status.findings.append(Finding(f"collect-{kind}", "unknown", c.error or kind, remedy))
    return status


def standalone_script(token: str = STANDALONE_TOKEN) -> str:
    from bsdcrypt.probe import build_script

    if not re.fullmatch(r"@@bsdcrypt-[A-Za-z0-9_.:-]+", token):
        raise BsdcryptError("the token must look like @@bsdcrypt-WORD (letters, digits, _ . : -)")
    return build_script(token)

