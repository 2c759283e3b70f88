"""A recorded host: answers the probe from a recording (bsdcrypt/recording.py is the format)."""

from __future__ import annotations

import re
from pathlib import Path

from bsdcrypt.errors import HostError
from bsdcrypt.hostapi import RunResult
from bsdcrypt.probe import PROBE_MAGIC, Evidence, render
from bsdcrypt.recording import Provenance, load_text, provenance_from, read_recording, remember_replayed


class ReplayHost:
    """A host answered from a recording. It can only run the probe."""

    kind = "replay"
    can_exec = False

    def __init__(self, evidence: Evidence, name: str, spec: str, provenance: Provenance | None = None) -> None:
        self.evidence = evidence
        self.name = name
        self.spec = spec
        self.provenance = provenance

    @classmethod
    def from_file(cls, path: Path) -> ReplayHost:
        text = read_recording(path)
        doc, evidence = load_text(text, str(path))
        name = str(doc.get("host") or path.stem)
        provenance = provenance_from(text, doc, name)
        return cls(evidence, name, f"replay:{path}", provenance)

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        if PROBE_MAGIC in command:
            match = re.search(r"^T=(\S+)$", command, re.M)
            if match:
                if self.provenance is not None:
                    remember_replayed(self.evidence, self.provenance)
                return RunResult(0, render(self.evidence, match.group(1)))
        first = command.strip().splitlines()[0] if command.strip() else command
        raise HostError(f"{self.spec} is a recording: it cannot run {first!r}")

    def abort(self) -> None:
        return None

    def close(self) -> None:
        return None
