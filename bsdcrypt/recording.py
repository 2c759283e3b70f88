"""Recordings: what the probe gathered on a host, saved as human-readable YAML.

See docs/recordings.md for the format. A ReplayHost answers the probe from a
recording, so every command that reads a host can run against one.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from bsdcrypt import __version__
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.probe import FILE_PREFIX, MAX_FILE_BYTES, Evidence, Step

FORMAT = 1
_SHIPPED = Path(__file__).parent / "recordings"
_REPO_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"


class RecordingError(BsdcryptError):
    pass


@dataclass(frozen=True)
class Provenance:
    """Where a recording's outputs came from: kept when a replayed recording is recorded again."""

    recorded_at: str | None
    source: str | None
    redacted: bool
    header: str  # the comment lines before the document ("# source: ...", "# derived: ...")
    tool_version: str | None = None
    host: str | None = None


# Evidence replayed from a recording in this process (by content), so that `record --host replay:X`
# keeps X's provenance: the probe's output is parsed anew, so the Evidence object itself is new.
_REPLAYED: dict[str, Provenance] = {}


def _fingerprint(evidence: Evidence) -> str:
    digest = hashlib.sha256()
    for name, st in evidence.steps.items():
        for part in (name.encode(), str(st.rc).encode(), st.out):
            digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def provenance_of(evidence: Evidence) -> Provenance | None:
    """The provenance of evidence replayed from a recording (or redacted from such evidence), else None."""
    return _REPLAYED.get(_fingerprint(evidence))


def _loader() -> type[yaml.SafeLoader]:
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _dumper() -> type[yaml.SafeDumper]:
    return getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def shipped_dirs() -> list[Path]:
    return [d for d in (_SHIPPED, _REPO_FIXTURES) if d.is_dir()]


def shipped_names() -> list[str]:
    names: set[str] = set()
    for d in shipped_dirs():
        names.update(p.stem for p in d.glob("*.yaml"))
    return sorted(names)


def description(path: Path, key: str = "description") -> str:
    """A recording's one-line `description:` (or another top-level `key`, such as `made_of`), read from
    its top lines without parsing the YAML, or ""."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith(f"{key}:"):
                    value = yaml.load(line, Loader=_loader()).get(key)
                    return " ".join(str(value).split()) if value is not None else ""
                if line.startswith("steps:"):
                    break
    except (OSError, yaml.YAMLError, AttributeError):
        return ""
    return ""


def shipped() -> list[tuple[str, Path]]:
    """(name, path) of every shipped recording, by name (the first directory holding a name wins)."""
    found: dict[str, Path] = {}
    for d in shipped_dirs():
        for p in sorted(d.glob("*.yaml")):
            found.setdefault(p.stem, p)
    return sorted(found.items())


def resolve_recording(ref: str) -> Path:
    """A path to a recording file, or the name of one shipped with bsdcrypt."""
    path = Path(ref).expanduser()
    if path.is_file() or (os.path.lexists(path) and not path.is_dir()):
        return path  # a device, FIFO or dangling link too: the reader says what it is, in one line
    if "/" not in ref:
        for d in shipped_dirs():
            for candidate in (d / ref, d / f"{ref}.yaml"):
                if candidate.is_file():
                    return candidate
    if path.is_dir():
        raise RecordingError(f"cannot read recording {ref}: it is a folder")
    hint = ", ".join(shipped_names()[:5])
    raise RecordingError(f"no recording at {ref!r} (shipped ones include: {hint}; see `bsdcrypt recordings`)")


def _step_to_yaml(st: Step) -> dict[str, Any]:
    entry: dict[str, Any] = {"rc": st.rc}
    try:
        entry["out"] = st.out.decode("utf-8")
    except UnicodeDecodeError:
        entry["out_base64"] = base64.b64encode(st.out).decode("ascii")
    return entry


# ---- reading an untrusted recording ------------------------------------------------------------------
# A recording is what users are asked to send and share, so it is read as hostile: the YAML events are
# scanned before anything is composed (no anchor, no alias, bounded depth and count), then every field
# is checked for its type and size. Each refusal is one RecordingError line.

MAX_DEPTH = 4  # a recording nests 3 deep (document -> steps -> step -> rc/out); one more is spare
MAX_EVENTS = 100_000  # YAML events: ~6 per step, a few hundred steps in the largest probe
MAX_STEPS = 4096  # steps in one recording (the probe has ~60, plus the loader files it follows)
MAX_STEP_NAME = 4200  # "file:" + PATH_MAX
MAX_TEXT_FIELD = 8192  # source (it names the host), description, tool_version, recorded_at
MAX_HOST = 4096  # the name it was recorded under (a host name is at most 253 characters)
_RC_RANGE = range(-1, 256)  # a shell's exit status (0-255); -1 is what a paste without one records
_TOP_KEYS = {
    "bsdcrypt_recording", "tool_version", "recorded_at", "host", "redacted", "description", "made_of", "source", "steps"
}
_STEP_KEYS = {"rc", "out", "out_base64"}


def _where(event: Any) -> str:
    mark = getattr(event, "start_mark", None)
    return f" line {mark.line + 1}:" if mark is not None else ""


def _short(name: str) -> str:
    return name if len(name) <= 40 and name.isprintable() else repr(name[:40])


def _check_events(text: str, origin: str) -> None:
    """Refuse what a recording never holds before PyYAML composes anything: an anchor or an alias (the
    alias bomb: nine levels of ten are 10^9 nodes once expanded), nesting deeper than a recording's,
    more events than any recording has, more than one document. Public PyYAML API only (yaml.parse)."""
    depth = 0
    docs = 0
    for count, event in enumerate(yaml.parse(text, Loader=_loader()), 1):
        if count > MAX_EVENTS:
            raise RecordingError(f"{origin}: more than {MAX_EVENTS} YAML nodes: not a bsdcrypt recording")
        if isinstance(event, yaml.AliasEvent):
            raise RecordingError(
                f"{origin}:{_where(event)} a YAML alias (*{_short(event.anchor or '')}): recordings never use "
                "anchors or aliases; refused"
            )
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise RecordingError(
                f"{origin}:{_where(event)} a YAML anchor (&{_short(anchor)}): recordings never use "
                "anchors or aliases; refused"
            )
        if isinstance(event, yaml.DocumentStartEvent):
            docs += 1
            if docs > 1:
                raise RecordingError(f"{origin}:{_where(event)} a second YAML document: a recording is one")
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise RecordingError(
                    f"{origin}:{_where(event)} nested deeper than a recording ({MAX_DEPTH} levels): refused"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _text_field(doc: dict[str, Any], key: str, origin: str, limit: int, *, required: bool = False) -> str | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise RecordingError(f"{origin}: '{key}' must be a string, not {_type_name(value)}")
    if len(value) > limit:
        raise RecordingError(f"{origin}: '{key}' is {len(value)} characters long (at most {limit})")
    return value


def _type_name(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", int: "an integer", bool: "true/false",
             float: "a number", bytes: "binary data", type(None): "empty"}
    return names.get(type(value), f"a {type(value).__name__}")


def _step_from_yaml(name: str, entry: Any, origin: str = "recording") -> Step:
    where = f"{origin}: step {_short(name)}"
    if not isinstance(entry, dict):
        raise RecordingError(f"{where} must be a mapping with 'rc' and 'out', not {_type_name(entry)}")
    extra = sorted(str(k) for k in entry if k not in _STEP_KEYS)
    if extra:
        raise RecordingError(f"{where}: unknown field {_short(extra[0])} (a step has rc, out or out_base64)")
    rc = entry.get("rc")
    if type(rc) is not int:
        raise RecordingError(f"{where} needs an integer 'rc', not {_type_name(rc)}")
    if rc not in _RC_RANGE:
        raise RecordingError(f"{where}: 'rc' {rc} is not an exit status (0-255)")
    if "out_base64" in entry:
        if "out" in entry:
            raise RecordingError(f"{where} has both 'out' and 'out_base64'")
        coded = entry["out_base64"]
        if not isinstance(coded, str):
            raise RecordingError(f"{where}: out_base64 must be a string, not {_type_name(coded)}")
        try:
            out = base64.b64decode(coded, validate=True)
        except ValueError as exc:
            raise RecordingError(f"{where}: out_base64 is not valid base64") from exc
    else:
        text = entry.get("out", "")
        if not isinstance(text, str):
            raise RecordingError(f"{where}: 'out' must be a string, not {_type_name(text)}")
        try:
            out = text.encode("utf-8")
        except UnicodeEncodeError as exc:  # a "\ud800" escape: no bytes spell it
            raise RecordingError(f"{where}: 'out' holds a character that is not Unicode text (use out_base64)") from exc
    return Step(rc, out)


def _step_name(key: Any, origin: str) -> str:
    if not isinstance(key, str):
        raise RecordingError(f"{origin}: a step name must be a string, not {_type_name(key)} ({_short(str(key))})")
    if not key or len(key) > MAX_STEP_NAME or not key.isprintable():
        raise RecordingError(f"{origin}: step name {_short(key)} is not a probe step name")
    return key


class _LiteralDumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_presenter)


def dump(
    evidence: Evidence,
    host: str,
    *,
    comment: str = "",
    redacted: bool = False,
    provenance: Provenance | None = None,
) -> str:
    """The recording of `evidence` as YAML text.

    Evidence replayed from a recording keeps that recording's provenance (recorded_at, source, comment
    header, tool_version; redacted stays true): recording a replay copies the recording, it does not
    observe a host. `provenance` overrides the lookup.
    """
    origin = provenance or provenance_of(evidence)
    source = comment or f"bsdcrypt record on {host}"
    recorded_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    tool_version = __version__
    header = f"# bsdcrypt recording of {host}\n# source: {source}\n"
    if origin is not None:
        was = origin.host
        rename = redacted and not origin.redacted and was and was != host
        source = origin.source or source
        header = origin.header or f"# source: {source}\n"
        if rename:  # an unredacted recording redacted now: its own texts may name the host
            source = _rename(source, was, host)
            header = _rename(header, was, host)
        recorded_at = origin.recorded_at or recorded_at
        tool_version = origin.tool_version or tool_version
        redacted = redacted or origin.redacted
        if _RERECORDED not in header:
            header += f"{_RERECORDED} (bsdcrypt {__version__}); recorded_at and source are the original's\n"
    doc: dict[str, Any] = {
        "bsdcrypt_recording": FORMAT,
        "tool_version": tool_version,
        "recorded_at": recorded_at,
        "host": host,
        "redacted": redacted,
        "source": source,
        "steps": {name: _step_to_yaml(st) for name, st in evidence.steps.items()},
    }
    body = yaml.dump(doc, Dumper=_LiteralDumper, sort_keys=False, allow_unicode=True, width=4096)
    return _printable_comment(header) + body


def _printable_comment(text: str) -> str:
    """The comment header with a host's control characters escaped: YAML rejects them anywhere in a
    stream, comments included, so a hostile host name would make the recording unreadable."""
    lines = text.split("\n")
    return "\n".join(ln if ln.isprintable() else ln.encode("unicode_escape").decode("ascii") for ln in lines)


_RERECORDED = "# re-recorded from a replay"


def _rename(text: str, old: str | None, new: str) -> str:
    if not old:
        return text
    for name in sorted({old, old.split(".")[0]} - {""}, key=len, reverse=True):
        text = re.sub(r"(?<![\w.-])" + re.escape(name) + r"(?![\w.-])", new, text)
    return text


def _header(text: str) -> str:
    """The comment lines (and blank lines) before a recording's first YAML line."""
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("#") or not line.strip():
            lines.append(line)
        else:
            break
    return "".join(lines).lstrip("\n")


def load_text(text: str, origin: str) -> tuple[dict[str, Any], Evidence]:
    """A recording's fields (each checked: `host`, `source`, ... are strings or absent, `redacted` a
    bool) and its evidence; RecordingError (one line) for anything a recording is not."""
    try:
        _check_events(text, origin)
        doc = yaml.load(text, Loader=_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise RecordingError(f"{origin}:{where} is not valid YAML") from exc
    except RecursionError as exc:  # pragma: no cover - the depth check comes first
        raise RecordingError(f"{origin}: nested too deep to be a recording") from exc
    if not isinstance(doc, dict) or "bsdcrypt_recording" not in doc:
        raise RecordingError(f"{origin} is not a bsdcrypt recording (format {FORMAT})")
    version = doc["bsdcrypt_recording"]
    if type(version) is not int or version != FORMAT:
        shown = version if type(version) is int else _short(str(version))
        raise RecordingError(
            f"{origin}: unsupported recording format {shown!r} (this bsdcrypt reads format {FORMAT})"
        )
    unknown = sorted(str(k) for k in doc if k not in _TOP_KEYS)
    if unknown:
        raise RecordingError(f"{origin}: unknown field {_short(unknown[0])} (not in recording format {FORMAT})")
    fields: dict[str, Any] = {"bsdcrypt_recording": FORMAT}
    for key in ("tool_version", "recorded_at", "source", "description", "made_of"):
        fields[key] = _text_field(doc, key, origin, MAX_TEXT_FIELD)
    fields["host"] = _text_field(doc, "host", origin, MAX_HOST)
    redacted = doc.get("redacted", False)
    if type(redacted) is not bool:
        raise RecordingError(f"{origin}: 'redacted' must be true or false, not {_type_name(redacted)}")
    fields["redacted"] = redacted
    steps = doc.get("steps")
    if not isinstance(steps, dict):
        raise RecordingError(f"{origin}: 'steps' must be a mapping")
    if not steps:
        raise RecordingError(f"{origin}: the recording has no probe steps (its 'steps' mapping is empty)")
    if len(steps) > MAX_STEPS:
        raise RecordingError(f"{origin}: {len(steps)} steps, more than a probe gathers (at most {MAX_STEPS})")
    evidence = Evidence({_step_name(k, origin): _step_from_yaml(str(k), v, origin) for k, v in steps.items()})
    big = next(
        (k for k, st in evidence.steps.items() if k.startswith(FILE_PREFIX) and len(st.out) > MAX_FILE_BYTES + 1), None
    )
    if big is not None:  # the probe reads at most 1 MiB + 1 of a file: nothing parses more (loader files)
        raise RecordingError(f"{origin}: step {_short(big)} holds more than the probe reads of a file (1 MiB)")
    fields["steps"] = steps
    return fields, evidence


MAX_RECORDING = 16 << 20  # 16 MiB: one host's probe output is 5-50 KB; the loader files alone may be 1 MiB each


def read_recording(path: Path) -> str:
    """The text of a recording file, read through the bounded reader."""
    from bsdcrypt.fsutil import InputError, read_input

    try:
        return read_input(str(path), MAX_RECORDING, "recording").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordingError(f"cannot read recording {path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} "
                             f"at offset {exc.start})") from exc
    except InputError as exc:
        raise RecordingError(str(exc)) from exc


def load(path: Path) -> tuple[dict[str, Any], Evidence]:
    return load_text(read_recording(path), str(path))


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def provenance_from(text: str, doc: dict[str, Any], name: str) -> Provenance:
    """A loaded recording's provenance (its header and metadata fields)."""
    return Provenance(
        recorded_at=_str_or_none(doc.get("recorded_at")),
        source=_str_or_none(doc.get("source")),
        redacted=doc.get("redacted") is True,
        header=_header(text),
        tool_version=_str_or_none(doc.get("tool_version")),
        host=name,
    )


def remember_replayed(evidence: Evidence, provenance: Provenance) -> None:
    """Note that `evidence` was replayed from a recording with `provenance` (see provenance_of)."""
    _REPLAYED[_fingerprint(evidence)] = provenance
