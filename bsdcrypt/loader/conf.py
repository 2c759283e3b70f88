"""loader.conf(5) files: the order the FreeBSD lua loader reads them in, and safe edits to them (pure).

How one line is classified is `bsdcrypt.parsers.loaderconf` (`config.parse` of `stand/lua/config.lua`);
which files each loader generation reads is `bsdcrypt.loader.model`. Here:

* ``<module>_load`` values are compared case-insensitively with "yes" (``v:upper()``, then
  ``load:lower() == "yes"``).
* File order: ``/boot/loader.conf``, then ``/boot/loader.conf.d/*.conf``, then
  ``/boot/loader.conf.local`` (``local_loader_conf_files``, read last since FreeBSD 14.1, commit
  a25531db0fc2).  The last assignment wins.  The loader reads the directory in readdir order; we sort
  by name, which is what ``ls`` shows and what the probe gathers.  Before 14.1 ``loader.conf.local``
  was part of ``loader_conf_files`` and was read *before* ``loader.conf.d``; `order_ambiguous`
  reports configurations where that difference changes the result.
* `set_yes`, `restore` and `apply` edit the files as bytes: CRLF, a missing final newline, tabs and
  non-UTF-8 bytes are kept as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bsdcrypt.facts import Assignment
from bsdcrypt.loader.model import DEVICE_HINTS, GENERATION_NAMES, Outcome, needed, outcomes
from bsdcrypt.parsers.loaderconf import Line, assignments, classify, decode, meaningful, parse
from bsdcrypt.probe import FILE_PREFIX, LOADER_CONF_DIR, Evidence, File, dir_step, file_step

LOADER_CONF = File.LOADER_CONF
LOADER_CONF_LOCAL = File.LOADER_CONF_LOCAL


def is_yes(assignment: Assignment | None) -> bool:
    """True when a `<module>_load` assignment makes the loader load the module."""
    return assignment is not None and assignment.value.lower() == "yes"


def _rank(path: str) -> tuple[int, str]:
    if path.endswith("/loader.conf.local") or path == "loader.conf.local":
        return (2, "")
    if "/loader.conf.d/" in path:
        return (1, path)
    if path.endswith("/loader.conf") or path == "loader.conf":
        return (0, "")
    return (1, "\uffff")  # unknown files: after loader.conf.d, before loader.conf.local, as given


def loader_order(files: Sequence[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """`files` in the order the loader reads them: loader.conf, loader.conf.d/*.conf (by name), .local.

    Works with `--root` prefixes (it looks at the path's tail); the sort is stable.
    """
    return sorted(files, key=lambda f: _rank(f[0]))


def all_assignments(files: Iterable[tuple[str, bytes]], name: str) -> list[Assignment]:
    """Every assignment of `name` in loader order."""
    out: list[Assignment] = []
    for path, data in loader_order(list(files)):
        out.extend(a for a in assignments(path, data) if a.name == name)
    return out


def effective(files: Iterable[tuple[str, bytes]], name: str) -> Assignment | None:
    """The assignment of `name` that wins (the last one in loader order), or None if none is made."""
    found = all_assignments(files, name)
    return found[-1] if found else None


def order_ambiguous(files: Iterable[tuple[str, bytes]], name: str) -> bool:
    """True if loaders before 14.1 (loader.conf.local read before loader.conf.d) would pick another value."""
    ordered = loader_order(list(files))
    old = [f for r in (0, 2, 1) for f in ordered if _rank(f[0])[0] == r]
    a, b = effective(ordered, name), _last(old, name)
    return is_yes(a) != is_yes(b)


def _last(ordered: list[tuple[str, bytes]], name: str) -> Assignment | None:
    found: list[Assignment] = []
    for path, data in ordered:
        found.extend(a for a in assignments(path, data) if a.name == name)
    return found[-1] if found else None


_FILE_LIST_VARIABLES = ("loader_conf_files", "loader_conf_dirs", "local_loader_conf_files")


def loader_files(candidates: Sequence[tuple[str, bytes]], root: str = "") -> list[tuple[str, bytes]]:
    """The loader configuration files among `candidates` (path, content): loader.conf,
    loader.conf.local, device.hints, the loader.conf.d entries, and the files (or directory entries)
    that a loader_conf_files / loader_conf_dirs / local_loader_conf_files value in one of them names.
    Any other file (an appliance's config.xml, os-release...) is left out, whatever its name."""
    root = root.rstrip("/")
    by_path = dict(candidates)
    standard = {root + p for p in (LOADER_CONF, LOADER_CONF_LOCAL, File.DEVICE_HINTS)}
    keep = {p for p in by_path if p in standard or _directly_under(p, root + LOADER_CONF_DIR)}
    named: set[str] = set()
    for _ in range(4):  # named files may name more (the probe collects two levels)
        for path in list(keep):
            for a in assignments(path, by_path[path]):
                if a.name in _FILE_LIST_VARIABLES:
                    named.update(root + w for w in a.value.split() if w.startswith("/"))
        more = {p for p in by_path if p not in keep and (p in named or any(_directly_under(p, d) for d in named))}
        if not more:
            break
        keep |= more
    return [(p, d) for p, d in candidates if p in keep]


def _directly_under(path: str, directory: str) -> bool:
    d = directory.rstrip("/") + "/"
    return path.startswith(d) and "/" not in path[len(d) :]


def files_from_evidence(evidence: Evidence, root: str = "") -> list[tuple[str, bytes]]:
    """The loader configuration files the probe read, in loader order (missing files are left out):
    loader.conf, loader.conf.local, device.hints, the loader.conf.d entries and whatever files and
    directories those name (`loader_files`)."""
    root = root.rstrip("/")
    prefix = file_step(root + "/")
    out = [(key[len(FILE_PREFIX) :], st.out) for key, st in evidence.steps.items() if key.startswith(prefix) and st.ok]
    return loader_order(loader_files(out, root))


def uncollected(evidence: Evidence, outs: Sequence[Outcome]) -> list[str]:
    """What the loader may read (in any of `outs`) that the probe did not collect: a file or directory
    that loader_conf_files / loader_conf_dirs name, or a file the probe would not read (status 2: a
    device, a FIFO, more than 1 MiB). /boot/device.hints, which older probes did not read, is taken to
    hold device hints only. Enable reads these itself; status says "cannot be told"."""
    paths, dirs = needed(outs)
    out = []
    for p in sorted(paths):
        st = evidence.steps.get(file_step(p))
        if (st is None and p != DEVICE_HINTS) or (st is not None and st.rc == 2):
            out.append(p)
    out += [
        d for d in sorted(dirs) if d.rstrip("/") != LOADER_CONF_DIR and dir_step(d.rstrip("/")) not in evidence.steps
    ]
    return out


def read_by_loader(files: Sequence[tuple[str, bytes]], major: int | None) -> list[tuple[str, bytes]]:
    """The files the loader of release `major` reads: loader.conf.d/*.conf only from 13.0 (lua
    loader_conf_dirs); before that those files have no effect. Unknown release: all of them."""
    if major is None or major >= 13:
        return list(files)
    return [f for f in files if "/loader.conf.d/" not in f[0]]


# --------------------------------------------------------------------------------------------------
# The editor (pure): the smallest change that makes `<name>` effectively "YES", and its exact undo.
#
# What enable changed is recorded on the changed line itself, in a trailing comment the loader
# ignores (see docs/enable.md):
#   aesni_load="YES" # bsdcrypt enable: added            a line enable appended
#   aesni_load="YES" # bsdcrypt enable: added+eol        ... after adding the missing final newline
#   aesni_load="YES" # bsdcrypt enable: added+lf         ... after adding only LF to a last line ending in
#                                                         a lone CR (its CRLF completed, the line unchanged)
#   aesni_load="YES" # bsdcrypt enable: was=NO           a line enable edited in place (old raw value,
#                                                         percent-encoded so it never holds a quote)
# The marker never contains '"': the loader's quoted-value pattern is greedy ('"(.*)"' runs to the
# last quote of the line), so a quote in a trailing comment would swallow the comment into the value.
# --------------------------------------------------------------------------------------------------

MARK = b" # bsdcrypt enable: "
_MARK_RE = re.compile(rb" # bsdcrypt enable: (added\+eol|added\+lf|added|was=[A-Za-z0-9%._-]*)\Z")
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_HEX = frozenset(b"0123456789ABCDEFabcdef")


def is_marker(tail: bytes) -> bool:
    """Whether `tail`, the end of an assignment line (its CR left out), is enable's marker comment."""
    return _MARK_RE.search(tail) is not None


class EditError(ValueError):
    """The editor could not produce a change it can prove correct."""


@dataclass(frozen=True)
class FileEdit:
    """One file's content before and after a change (paths are as seen on the host, --root included)."""

    path: str
    before: bytes
    after: bytes
    existed: bool = True  # False: the file does not exist yet and will be created

    @property
    def changed(self) -> bool:
        return self.before != self.after or not self.existed

    def diff(self) -> str:
        """A unified diff, like `diff -u`, including "No newline at end of file" markers."""
        import difflib

        def lines(data: bytes) -> list[str]:
            out = [ln.decode("utf-8", errors="replace") for ln in data.splitlines(keepends=True)]
            out = [ln.replace("\r\n", "\u240d\n") if ln.endswith("\r\n") else ln for ln in out]
            if out and not out[-1].endswith("\n"):
                out[-1] += "\n\\ No newline at end of file\n"
            return out

        src = self.path if self.existed else "/dev/null"
        return "".join(difflib.unified_diff(lines(self.before), lines(self.after), src, self.path))


def line_ending(data: bytes) -> bytes:
    """The file's own line ending: CRLF if most of its lines end in CRLF, else LF."""
    total = data.count(b"\n")
    crlf = data.count(b"\r\n")
    return b"\r\n" if total and crlf * 2 > total else b"\n"


def _encode(raw: bytes) -> bytes:
    return b"".join(bytes([c]) if c in _SAFE else b"%%%02X" % c for c in raw)


def _decode(enc: bytes) -> bytes | None:
    """What `_encode` encoded; None when `enc` is not something it could have produced (a damaged
    marker: a `%` not followed by two hex digits)."""
    out = bytearray()
    i = 0
    while i < len(enc):
        if enc[i] == 0x25:  # "%XX"
            hx = enc[i + 1 : i + 3]
            if len(hx) != 2 or any(c not in _HEX for c in hx):
                return None
            out.append(int(hx, 16))
            i += 3
        else:
            out.append(enc[i])
            i += 1
    return bytes(out)


def _split_cr(text: bytes) -> tuple[bytes, bytes]:
    """`text` without a trailing CR, and the CR (so a marker goes before the CR of a CRLF line)."""
    return (text[:-1], b"\r") if text.endswith(b"\r") else (text, b"")


def _replace_line(data: bytes, line: Line, new_text: bytes) -> bytes:
    return data[: line.offset] + new_text + data[line.offset + len(line.text) :]


def _set_line_yes(data: bytes, line: Line) -> bytes:
    """Edit one assignment line in place: value -> YES (quoting kept), old value recorded."""
    old = line.text[line.value_start : line.value_end]
    body, cr = _split_cr(line.text)
    if _MARK_RE.search(body):  # ours already (e.g. the user set it back to NO by hand): keep the first record
        body = body[: line.value_start] + b"YES" + body[line.value_end :]
        new_text = body + cr
    else:
        body = body[: line.value_start] + b"YES" + body[line.value_end :]
        new_text = body + MARK + b"was=" + _encode(old) + cr
    return _replace_line(data, line, new_text)


def _lines_named(data: bytes, name: str) -> list[Line]:
    return [ln for ln in meaningful(data) if ln.kind == "assign" and ln.name == name]


def _old_order(files: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    ordered = loader_order(files)
    return [f for r in (0, 2, 1) for f in ordered if _rank(f[0])[0] == r]


def _winner(ordered: list[tuple[str, bytes]], name: str) -> tuple[str, Line] | None:
    found: tuple[str, Line] | None = None
    for path, data in ordered:
        lines = _lines_named(data, name)
        if lines:
            found = (path, lines[-1])
    return found


def _not_yes(
    files: list[tuple[str, bytes]], name: str, major: int | None, root: str
) -> tuple[str, Assignment | None] | None:
    """(generation, the assignment in effect there) of a loader run in which `name` is not YES, or None
    when every generation and directory order the release may boot with reads YES."""

    module = name.removesuffix("_load")
    for o in outcomes(files, module, major, root):
        if not o.yes:
            return o.generation, o.load
    return None


def set_yes(
    files: Sequence[tuple[str, bytes]], name: str = "aesni_load", root: str = "", major: int | None = None
) -> list[FileEdit]:
    """The smallest edits that make `name` YES in every way the loader may read it; [] if it already is.

    The loader is followed as `bsdcrypt.loader.model` models it, for every generation release `major`
    may boot with and every order of loader.conf.d (which the loader reads in directory order, not by
    name). While some run of it does not read YES:
    * its assignment in effect is not YES: edit that line in place (in loader.conf.local, a
      loader.conf.d file or a file loader_conf_files names, wherever it is), keeping its quoting; the
      old value goes into a trailing marker comment;
    * it makes no assignment: append `name="YES"` to <root>/boot/loader.conf with the file's own line
      ending, adding the missing final newline first; create the file if it does not exist.
    So every assignment the loader may read last ends up YES, whatever the order. Every other byte is
    kept. The result is checked again before it is returned (EditError if it cannot be made so).
    """

    current = {path: data for path, data in files}
    order = [path for path, _ in loader_order(list(files))]
    original = dict(current)
    created: set[str] = set()
    root = root.rstrip("/")

    def snapshot() -> list[tuple[str, bytes]]:
        return [(p, current[p]) for p in order]

    appended = False
    for _ in range(4 * len(order) + 4):
        miss = _not_yes(snapshot(), name, major, root)
        if miss is None:
            break
        gen, winner = miss
        if winner is not None and winner.path in current:
            line = next(
                (ln for ln in parse(current[winner.path]) if ln.number == winner.line and ln.kind == "assign"), None
            )
            if line is not None and line.name == name and not is_yes(line.assignment(winner.path)):
                current[winner.path] = _set_line_yes(current[winner.path], line)
                continue
        if appended:
            raise EditError(
                f"cannot make {name}=\"YES\" effective for {GENERATION_NAMES.get(gen, gen)}: it does not read "
                f"the line appended to {root + LOADER_CONF}"
                + (f" (the assignment in effect is {winner.path}:{winner.line})" if winner else "")
            )
        # No assignment in effect: append to loader.conf.
        target = next((p for p in order if _rank(p) == (0, "")), root + LOADER_CONF)
        if target not in current:
            current[target] = b""
            original[target] = b""
            order.insert(0, target)
            created.add(target)
        data = current[target]
        eol = line_ending(data)
        tag = b"added"
        if data.endswith(b"\r"):
            # A last line ending in a lone CR (a CRLF file cut after its CR): only LF is added, so the
            # loader reads that line byte for byte as before (CRLF would make it "...\r\r", a line
            # the loader prints differently if it is malformed: an edit never makes its reading worse).
            data += b"\n"
            tag = b"added+lf"
        elif data and not data.endswith(b"\n"):
            data += eol
            tag = b"added+eol"
        current[target] = data + name.encode() + b'="YES"' + MARK + tag + eol
        appended = True
    else:  # pragma: no cover - each step converts one line; cannot loop
        raise EditError(f"could not make {name} effective")

    if _not_yes(snapshot(), name, major, root) is not None:  # pragma: no cover - defensive
        raise EditError(f"internal error: {name} is not effective after the edit")
    edits = [
        FileEdit(path, original[path], current[path], existed=path not in created)
        for path in order
        if current[path] != original[path] or path in created
    ]
    for e in edits:
        verify_no_new_malformed(e)
    return edits


def _undo_line(line: Line, name: str) -> tuple[bytes, bytes] | None:
    """(tag, the line as it was before enable) for a line carrying enable's marker; None if it has none.

    For an appended line the second item is b"" (the line goes). Raises `_Damaged` when the marker
    is enable's but cannot be undone exactly: a `was=` value that is not %-encoded, or that would
    not read back as the same `name` assignment with that raw value (a newline, a quote in a bare
    word, ...).
    """
    if line.kind != "assign" or line.name != name:
        return None
    body, cr = _split_cr(line.text)
    m = _MARK_RE.search(body)
    if m is None:
        return None
    tag = m.group(1)
    if not tag.startswith(b"was="):
        return tag, b""
    old = _decode(tag[4:])
    if old is None or b"\n" in old or line.value_end > m.start():
        raise _Damaged(tag.decode("ascii"))
    body = body[: m.start()]
    new = body[: line.value_start] + old + body[line.value_end :] + cr
    kind, match, _quoted = classify(new)
    if kind != "assign" or match is None or decode(match.group("n")) != name or match.group("v") != old:
        raise _Damaged(tag.decode("ascii"))
    return tag, new


class _Damaged(Exception):
    """A bsdcrypt marker that cannot be undone exactly (the text of the marker's tag)."""


def damaged_markers(files: Sequence[tuple[str, bytes]], name: str = "aesni_load") -> list[tuple[str, int, str]]:
    """(path, line number, marker tag) of every enable marker that `restore` cannot undo exactly: the
    value before enable is unknown there, so those lines are left alone."""
    out: list[tuple[str, int, str]] = []
    for path, data in loader_order(list(files)):
        for line in parse(data):
            try:
                _undo_line(line, name)
            except _Damaged as exc:
                out.append((path, line.number, str(exc)))
    return out


def restore(files: Sequence[tuple[str, bytes]], name: str = "aesni_load") -> list[FileEdit]:
    """Undo what `set_yes` recorded in its marker comments, byte for byte; [] if it left none.

    A damaged marker (`damaged_markers`) is not undone: its line is left as it is.
    """
    edits: list[FileEdit] = []
    for path, data in loader_order(list(files)):
        new = data
        # Work bottom-up so earlier offsets stay valid.
        for line in reversed(parse(data)):
            try:
                undo = _undo_line(line, name)
            except _Damaged:
                continue
            if undo is None:
                continue
            tag, text = undo
            if tag.startswith(b"was="):
                new = _replace_line(new, line, text)
                continue
            # An appended line: drop it with its line ending.
            start, end = line.offset, line.offset + len(line.text) + (1 if line.terminated else 0)
            if tag == b"added+eol":
                eol = b"\r\n" if new[:start].endswith(b"\r\n") else b"\n"
                if new[:start].endswith(eol):
                    start -= len(eol)
            elif tag == b"added+lf" and new[:start].endswith(b"\n"):
                start -= 1  # the LF only: the lone CR before it was the file's
            new = new[:start] + new[end:]
        if new != data:
            edits.append(FileEdit(path, data, new))
    for e in edits:
        verify_no_new_malformed(e)
    return edits


def _line_key(text: bytes) -> bytes:
    """A line without its trailing white space (a CR of CRLF included): what the loader parses of it
    does not change when the editor adds a line ending after it (a last line "junk\\r" becoming
    "junk\\r\\r\\n" in a CRLF file)."""
    return text.rstrip(b" \t\v\f\r")


def verify_no_new_malformed(edit: FileEdit) -> None:
    """Never write a line the loader could fail to parse: no line may become malformed. A line that
    was malformed already and that the edit leaves as it was (see `_line_key`) is not the edit's: it
    is warned about (plan), never a reason to refuse."""
    before: dict[bytes, int] = {}
    for ln in parse(edit.before):
        if ln.kind == "malformed":
            before[_line_key(ln.text)] = before.get(_line_key(ln.text), 0) + 1
    for ln in parse(edit.after):
        if ln.kind != "malformed":
            continue
        key = _line_key(ln.text)
        if before.get(key, 0) <= 0:
            raise EditError(f"refusing to write {edit.path}: line {ln.number} would be malformed")
        before[key] -= 1


def apply(files: Sequence[tuple[str, bytes]], edits: Iterable[FileEdit]) -> list[tuple[str, bytes]]:
    """`files` with `edits` applied (created files included), in loader order."""
    current = dict(files)
    for e in edits:
        current[e.path] = e.after
    return loader_order(list(current.items()))
