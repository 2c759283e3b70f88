"""Duplicate hosts-file lines: the same connection listed twice is audited once, and a note says so.

Two stages. Before the run, lines equal as written and replays of one file (`quick` identities) are set
aside. During the run, each SSH line's worker looks its ssh config up (under the host's deadline) and
claims the identity the config makes of it (`claim`): a line finding an earlier line's claim is dropped
at once; one finding only a later line's goes on (both are audited), and after the run the later row is
dropped (`settle`). The lowest line of a group is always the one kept and named first.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

from bsdcrypt.hostsfile import Duplicate, HostEntry


class Duplicates:
    """What one run knows of its duplicates: `dup_of` maps a dropped line's index to the line it repeats."""

    def __init__(self) -> None:
        self.dup_of: dict[int, int] = {}
        self._claims: dict[Hashable, list[int]] = {}  # identity -> lines audited for it, lowest first
        self._lock = threading.Lock()

    def set_aside(self, identities: Sequence[Hashable]) -> list[int]:
        """The lines to audit, given each line's identity known before the run (in line order)."""
        seen: dict[Hashable, int] = {}
        for i, ident in enumerate(identities):
            first = seen.setdefault(ident, i)
            if first != i:
                self.dup_of[i] = first
        return [i for i in range(len(identities)) if i not in self.dup_of]

    def claim(self, ident: Hashable, i: int) -> int | None:
        """Line `i` makes connection `ident`: the earlier line already under way for it (then `i` is its
        duplicate and is not audited), or None (it goes on)."""
        with self._lock:
            lines = self._claims.setdefault(ident, [])
            if lines and lines[0] < i:
                return lines[0]
            if i not in lines:
                lines.insert(0, i)
            return None

    def dropped(self, i: int, first: int) -> None:
        with self._lock:
            self.dup_of[i] = first

    def settle(self, results: dict[int, object]) -> None:
        """After the run: of lines of one identity that were all audited, keep the lowest with a row; a
        duplicate of a line whose row was dropped is one of the kept line."""
        for lines in self._claims.values():
            kept = [i for i in sorted(set(lines)) if i in results]
            for i in kept[1:]:
                del results[i]
                self.dup_of[i] = kept[0]
        for i, first in list(self.dup_of.items()):
            while first in self.dup_of and first not in results:
                first = self.dup_of[first]
            self.dup_of[i] = first

    def notes(self, entries: Sequence[HostEntry]) -> list[str]:
        """One note per audited line that had duplicates, in line order."""
        groups: dict[int, Duplicate] = {}
        for i in sorted(self.dup_of):
            root = self.dup_of[i]
            while root in self.dup_of:
                root = self.dup_of[root]
            first = entries[root]
            dup = groups.setdefault(root, Duplicate(first.spec, first.source))
            dup.others.append(entries[i].source)
            dup.other_specs.append(entries[i].spec)
        return [str(groups[root]) for root in sorted(groups)]
