"""Which loader files the FreeBSD loader reads, in which order, and whether it loads a module (pure).

`loaderconf` classifies the lines of one file; this module follows the loader from file to file:

* **lua, 13.0 to 14.0** (`stand/lua/config.lua`, `config.readConf`): `/boot/defaults/loader.conf`,
  then every file its `loader_conf_files` names, each one's own `loader_conf_files` read right after
  it (depth first; the variable is cleared before each file, so it means "the files named in *this*
  file"), then every directory in the final `loader_conf_dirs`, its entries in **readdir order**
  (`lfs.dir`, whatever order the file system gives) and selected with the Lua pattern ``".conf$"``
  (any character before ``conf``: ``.aesni.conf``, ``local_conf``, ``aesniconf`` are read), regular
  files only. The defaults name `/boot/device.hints /boot/loader.conf /boot/loader.conf.local`.
* **lua, 14.1 and later** (commit a25531db0fc2): the same, `loader.conf.local` moved out of
  `loader_conf_files` into `local_loader_conf_files`, read after the directories.
* **lua, 12.x** (`readConfFiles`): `loader_conf_files` only, no directories; a file that changes the
  variable makes the loader read the new list (skipping files already read), then go on with the old.
* **Forth, 11.x and before** (`stand/forth/support.4th`, `include_conf_files`): like 12.x; a syntax
  error ends the file (`load_conf` throws), a CR is not white space there (so a CRLF line is an
  error), `_load` counts only as `YES`/`yes` (`yes_value?`), and there is no `module_blacklist`.

Every lua generation skips a module named in the final `module_blacklist` (split on anything that is
not ``[-%w_]``, `getBlacklist`) whatever its `_load` says. A file is read once per name. Values are
expanded like `processEnvVar` (``$name``, ``${name}``, ``\\x``); a stray quote drops the assignment.

What is not modelled, and said so: `product_vars` (directories named from SMBIOS values), `.lua`
files (run, not parsed), `nextboot.conf` (one boot only). `/boot/defaults/loader.conf` is not read
from the host: its three file lists and `module_blacklist` are taken per generation as shipped.

`outcomes` runs the loader over every generation the release may boot with and, when a directory
holds several files, over every order of them (up to 4 files; beyond, each file first and each
last, and the sorted and reversed orders): an answer holds only if it holds in all of them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from bsdcrypt.facts import Assignment
from bsdcrypt.parsers.loaderconf import Line, meaningful, parse

DEFAULTS = "/boot/defaults/loader.conf"
DEVICE_HINTS = "/boot/device.hints"

_BLACKLIST = b'module_blacklist="drm drm2 radeonkms i915kms amdgpu"\n'
_OLD_FILES = b'loader_conf_files="/boot/device.hints /boot/loader.conf /boot/loader.conf.local"\n'
# What /boot/defaults/loader.conf of each generation says about the files to read (and the blacklist).
DEFAULTS_TEXT: dict[str, bytes] = {
    "forth": _OLD_FILES,
    "lua12": _OLD_FILES,
    "lua13": _OLD_FILES + b'loader_conf_dirs="/boot/loader.conf.d"\n' + _BLACKLIST,
    "lua14": b'loader_conf_files="/boot/device.hints /boot/loader.conf"\n'
    b'loader_conf_dirs="/boot/loader.conf.d"\n'
    b'local_loader_conf_files="/boot/loader.conf.local"\n' + _BLACKLIST,
}
GENERATION_NAMES = {
    "forth": "the Forth loader (11.x and before)",
    "lua12": "the 12.x lua loader",
    "lua13": "the 13.0-14.0 lua loader",
    "lua14": "the 14.1+ lua loader",
}

_MODULE = re.compile(r"([-A-Za-z0-9_]+)_(load|name|type|flags|before|after|error)")
_CONF_ENTRY = re.compile(r".conf\Z", re.S)  # the Lua pattern ".conf$": any one character, then "conf"
_LIST_WORD = re.compile(r"[!-~]+")  # gmatch("[%w%p]+"): printable, non-blank ASCII runs
_BLACKLIST_WORD = re.compile(r"[-A-Za-z0-9_]+")  # getBlacklist: "[;, ]?([-%w_]+)[;, ]?"
_VAR = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.]*")  # processEnvVar's "^([%w][-%w%d_.]*)"
MAX_ORDERS = 64  # directory orders tried per generation


def generations(major: int | None) -> tuple[str, ...]:
    """The loader generations a host of release `major` may boot with, the likeliest first.

    13.0 and later: both lua generations, since the loader binary (on the ESP, or a boot partition
    not updated with the system) can be older or newer than the userland. Unknown: like 13.0+."""
    if major is None or major >= 13:
        return ("lua14", "lua13")
    if major == 12:
        return ("lua12",)
    return ("forth",)


def conf_dir_entry(name: str) -> bool:
    """Whether config.lua reads a loader_conf_dirs entry of this name (``cfile:match(".conf$")``)."""
    return _CONF_ENTRY.search(name) is not None


@dataclass(frozen=True)
class Outcome:
    """What one generation of the loader, reading one directory order, does with one module."""

    generation: str
    order: tuple[str, ...]  # host paths of the files it read, in order
    opened: tuple[str, ...]  # loader paths it tried to open (read or not there)
    dirs: tuple[str, ...]  # loader directories it listed
    load: Assignment | None  # the <module>_load assignment in effect
    blacklist: Assignment | None  # the module_blacklist assignment in effect, if it names the module
    unmodelled: tuple[str, ...] = ()  # why the answer may be wrong (product_vars, a .lua file)

    @property
    def yes(self) -> bool:
        if self.load is None:
            return False
        if self.generation == "forth":
            return self.load.value in ("YES", "yes")
        return self.load.value.lower() == "yes"

    @property
    def loads(self) -> bool:
        """The loader loads the module at boot."""
        return self.yes and self.blacklist is None


@dataclass
class _State:
    generation: str
    root: str
    view: dict[str, bytes]
    orders: dict[str, tuple[str, ...]]
    module: str
    env: dict[str, str] = field(default_factory=dict)
    env_src: dict[str, Assignment] = field(default_factory=dict)
    modules: dict[tuple[str, str], Assignment] = field(default_factory=dict)
    loaded: set[str] = field(default_factory=set)
    order: list[str] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    listings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unmodelled: list[str] = field(default_factory=list)
    assigned_files: bool = False
    parsed: dict[bytes, list[Line]] = field(default_factory=dict)

    def host(self, loader_path: str) -> str:
        return self.root + (loader_path if loader_path.startswith("/") else "/" + loader_path)

    def lines(self, data: bytes) -> list[Line]:
        """The lines of a file the loader acts on (no blank or comment line, which change nothing)."""
        got = self.parsed.get(data)
        if got is None:
            got = self.parsed[data] = meaningful(data)
        return got


def _expand(value: str, env: dict[str, str], restricted: bool) -> str | None:
    """processEnvVar: `\\x` -> x, `$name`/`${name}` -> its value ("" if unset), a stray `"` -> None."""
    if "$" not in value and "\\" not in value and '"' not in value:
        return value  # what the loop below makes of it, character by character
    out: list[str] = []
    i, n = 0, len(value)
    while i < n:
        c = value[i]
        if c == "\\":
            if i + 1 >= n:
                return None
            out.append(value[i + 1])
            i += 2
        elif c == '"':
            return None
        elif c == "$":
            if i + 1 >= n:
                return None
            if value[i + 1] == "{":
                end = value.find("}", i + 2)
                if end < 0 or end == i + 2:
                    return None
                name, i = value[i + 2 : end], end + 1
            else:
                m = _VAR.match(value, i + 1)
                if m is None:
                    return None
                name, i = m.group(0), m.end()
            if not (restricted and name == "loader_conf_files"):
                out.append(env.get(name, ""))
        else:
            out.append(c)
            i += 1
    return "".join(out)


# Each generation's state after /boot/defaults/loader.conf (built-in text read into an empty state)
_DEFAULT_STATE: dict[str, _State] = {}


def _process(st: _State, loader_path: str, data: bytes) -> None:
    """Apply one file's assignments to the loader's state."""
    if loader_path != DEFAULTS:
        _apply(st, st.host(loader_path), st.lines(data))
    elif st.env or st.modules:
        _apply(st, DEFAULTS, parse(data))
    else:
        _apply_defaults(st)


def _apply_defaults(st: _State) -> None:
    """The defaults, read first of all: the same text into the same empty state on every host, so
    their effect is worked out once per generation and copied."""
    done = _DEFAULT_STATE.get(st.generation)
    if done is None:
        done = _State(st.generation, "", {}, {}, st.module)
        _apply(done, DEFAULTS, parse(DEFAULTS_TEXT[st.generation]))
        _DEFAULT_STATE[st.generation] = done
    st.env.update(done.env)
    st.env_src.update(done.env_src)
    st.modules.update(done.modules)
    st.assigned_files = st.assigned_files or done.assigned_files


def _apply(st: _State, path: str, lines: list[Line]) -> None:
    """The assignments of one file's `lines` (`path`: the host path, for Assignment) into the state."""
    forth = st.generation == "forth"
    for line in lines:
        if forth and (line.kind == "malformed" or b"\r" in line.text):
            break  # support.4th: a syntax error ends the file; CR is not white space there
        if line.kind != "assign" or line.name is None or line.value is None:
            continue
        a = Assignment(path=path, line=line.number, name=line.name, value=line.value)
        m = _MODULE.fullmatch(line.name)
        if m is not None:
            st.modules[(m.group(1), m.group(2))] = a
            continue
        if line.name == "exec":
            continue
        value = line.value if forth else _expand(line.value, st.env, st.generation in ("lua13", "lua14"))
        if value is None:
            continue
        st.env[line.name] = value
        st.env_src[line.name] = a if value == a.value else Assignment(path, a.line, a.name, value)
        if line.name == "loader_conf_files":
            st.assigned_files = True


def _read(st: _State, loader_path: str) -> None:
    """Open and process one file (the loader ignores a file that is not there)."""
    st.opened.append(loader_path)
    if loader_path.endswith(".lua") and st.generation == "lua14":
        st.unmodelled.append(f"{st.host(loader_path)} is a lua file: the loader runs it")
    data = DEFAULTS_TEXT[st.generation] if loader_path == DEFAULTS else st.view.get(st.host(loader_path))
    if data is None:
        return
    if loader_path != DEFAULTS:
        st.order.append(st.host(loader_path))
    _process(st, loader_path, data)


def _words(value: str | None) -> list[str]:
    return _LIST_WORD.findall(value or "")


def _listing(st: _State, directory: str) -> tuple[str, ...]:
    """The entries config.lua reads from `directory`, in the order under test (default: by name)."""
    d = st.host(directory).rstrip("/")
    names = sorted(
        p[len(d) + 1 :] for p in st.view if p.startswith(d + "/") and "/" not in p[len(d) + 1 :]
    )
    names = [n for n in names if conf_dir_entry(n)]
    st.listings[directory] = tuple(names)
    wanted = st.orders.get(directory)
    if wanted is not None and sorted(wanted) == names:
        return wanted
    return tuple(names)


def _read_conf(st: _State, loader_path: str) -> None:
    """config.readConf (13.0 and later)."""
    if loader_path in st.loaded:
        return
    top = not st.loaded
    st.env.pop("loader_conf_files", None)
    _read(st, loader_path)
    st.loaded.add(loader_path)
    for name in _words(st.env.get("loader_conf_files")):
        _read_conf(st, name)
    if not top:
        return
    if st.generation == "lua14" and st.env.get("product_vars"):
        st.unmodelled.append(
            "product_vars is set: the loader also reads /boot/loader.conf.d/<product> directories named "
            "from SMBIOS values"
        )
    for directory in _words(st.env.get("loader_conf_dirs")):
        st.dirs.append(directory)
        for entry in _listing(st, directory):
            _read_conf(st, directory.rstrip("/") + "/" + entry)
    if st.generation == "lua14":
        for name in _words(st.env.get("local_loader_conf_files")):
            _read_conf(st, name)


def _read_conf_files(st: _State) -> None:
    """readConfFiles (lua 12.x) and include_conf_files (Forth)."""
    for name in _words(st.env.get("loader_conf_files")):
        if name in st.loaded:
            continue
        before = st.env.get("loader_conf_files")
        st.assigned_files = False
        _read(st, name)
        st.loaded.add(name)
        changed = st.assigned_files if st.generation == "forth" else st.env.get("loader_conf_files") != before
        if changed:
            _read_conf_files(st)


def simulate(
    files: Iterable[tuple[str, bytes]],
    module: str,
    generation: str,
    root: str = "",
    orders: dict[str, tuple[str, ...]] | None = None,
    parsed: dict[bytes, list[Line]] | None = None,
) -> tuple[Outcome, dict[str, tuple[str, ...]]]:
    """One run of the loader: its Outcome for `module`, and the directories it listed (loader path ->
    the entries it selected, by name). `parsed`: the files' lines the loader acts on (loaderconf.meaningful)
    as earlier runs on the same files read them (filled in here)."""
    st = _State(generation, root.rstrip("/"), dict(files), dict(orders or {}), module)
    if parsed is not None:
        st.parsed = parsed
    if generation in ("lua13", "lua14"):
        _read_conf(st, DEFAULTS)
    else:
        _read(st, DEFAULTS)
        st.loaded.add(DEFAULTS)
        _read_conf_files(st)
    load = st.modules.get((module, "load"))
    blacklist = None
    if generation != "forth":
        name = st.modules.get((module, "name"))
        target = name.value if name is not None else module
        value = st.env.get("module_blacklist")
        if value is not None and target in _BLACKLIST_WORD.findall(value):
            blacklist = st.env_src.get("module_blacklist")
    outcome = Outcome(
        generation=generation,
        order=tuple(st.order),
        opened=tuple(st.opened),
        dirs=tuple(st.dirs),
        load=load,
        blacklist=blacklist,
        unmodelled=tuple(dict.fromkeys(st.unmodelled)),
    )
    return outcome, st.listings


def _orders_of(names: tuple[str, ...]) -> list[tuple[str, ...]]:
    if len(names) < 2:
        return [names]
    if len(names) <= 4:
        return list(itertools.permutations(names))
    out = [names, names[::-1]]
    for n in names:
        rest = tuple(x for x in names if x != n)
        out += [(n, *rest), (*rest, n)]
    return list(dict.fromkeys(out))


def outcomes(
    files: Iterable[tuple[str, bytes]], module: str, major: int | None = None, root: str = ""
) -> list[Outcome]:
    """The loader's Outcome for `module` under every generation release `major` may boot with and
    every directory order that matters (the first is the likeliest generation, entries by name)."""
    files = list(files)
    out: list[Outcome] = []
    parsed: dict[bytes, list[Line]] = {}  # each file parsed once for all the runs below
    for gen in generations(major):
        first, listings = simulate(files, module, gen, root, parsed=parsed)
        out.append(first)
        seen: set[tuple[tuple[str, tuple[str, ...]], ...]] = set()
        for rnd in range(3):  # a new order can make the loader list another directory: look again
            dirs = sorted(d for d, names in listings.items() if len(names) > 1)
            if not dirs:
                break
            if rnd == 0:
                seen.add(tuple((d, listings[d]) for d in dirs))  # the run just made (entries by name)
            combos = list(itertools.islice(itertools.product(*(_orders_of(listings[d]) for d in dirs)), MAX_ORDERS))
            more: dict[str, tuple[str, ...]] = {}
            for combo in combos:
                key = tuple(zip(dirs, combo, strict=True))
                if key in seen:
                    continue
                seen.add(key)
                o, got = simulate(files, module, gen, root, dict(key), parsed)
                out.append(o)
                more.update({d: n for d, n in got.items() if d not in listings})
            if not more:
                break
            listings = {**listings, **more}
    return out


def needed(outs: Sequence[Outcome]) -> tuple[set[str], set[str]]:
    """(files, directories) the loader may open or list in any of `outs`, as loader paths."""
    paths: set[str] = set()
    dirs: set[str] = set()
    for o in outs:
        paths.update(o.opened)
        dirs.update(o.dirs)
    paths.discard(DEFAULTS)
    return paths, dirs


def agree(outs: Sequence[Outcome], what: Callable[[Outcome], bool]) -> bool | None:
    """True/False when every outcome agrees on `what`, None when they differ (or there are none)."""
    got = {what(o) for o in outs}
    return got.pop() if len(got) == 1 else None
