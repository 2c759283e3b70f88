"""The package's imports point down only (docs/architecture.md).

Every import of bsdcrypt's modules is read from the source (module level and inside functions alike: a
function-level import is still a dependency, and used to hide cycles), then:
* no cycle, at any depth;
* no module imports one of a higher layer;
* only the CLI imports typer (or click);
* only hosts/open.py makes hosts of every kind;
* the old homes of moved modules stay gone, and nothing (package, tests, benchmarks) imports them;
* no test or benchmark reaches into a private name (leading underscore) of a bsdcrypt module: they test
  through public names (a name tests legitimately need is made public).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "bsdcrypt"

# Layers from the bottom up; a module's layer is that of its longest matching prefix. A module may import
# its own layer (the cycle check keeps that a DAG) and any layer below.
LAYERS: list[tuple[str, ...]] = [
    # foundation: errors, signals, what is known of the platform, the data model, bounded reads, the one
    # host-text sanitizer, the Host API and the grammar of a host
    ("bsdcrypt", "bsdcrypt.errors", "bsdcrypt.interrupts", "bsdcrypt.platform", "bsdcrypt.facts",
     "bsdcrypt.status", "bsdcrypt.fsutil", "bsdcrypt.text", "bsdcrypt.hostapi", "bsdcrypt.hostspec"),
    # one pure parser per source
    ("bsdcrypt.parsers",),
    # gathering: the one probe; the hosts file
    ("bsdcrypt.probe", "bsdcrypt.hostsfile"),
    # what each loader(8) generation reads, and the safe edits to the loader files
    ("bsdcrypt.loader",),
    # the recording format of the probe's evidence (load, dump, redact: redaction knows the loader files)
    ("bsdcrypt.recording", "bsdcrypt.redact"),
    # the parse stage: a host's evidence -> its facts, once (parse.parse -> HostFacts)
    ("bsdcrypt.parse",),
    # the kinds of host (local, replay, ssh), the one host factory, -v
    ("bsdcrypt.hosts", "bsdcrypt.ssh"),
    # facts -> Status with findings, by subject
    ("bsdcrypt.assess",),
    # what others collected: pastes, other engines' output
    ("bsdcrypt.collect",),
    # the one gather -> parse -> assess path
    ("bsdcrypt.pipeline",),
    # acting on a host, measuring it, running a fleet, the userland recipe
    ("bsdcrypt.enable", "bsdcrypt.bench", "bsdcrypt.fleet", "bsdcrypt.userland"),
    # renderers
    ("bsdcrypt.render",),
    # the typer layer
    ("bsdcrypt.cli", "bsdcrypt.__main__"),
]
CLI = ("bsdcrypt.cli", "bsdcrypt.__main__")
HOST_KINDS = {"bsdcrypt.hosts.replay": "ReplayHost", "bsdcrypt.ssh": "SSHHost", "bsdcrypt.ssh.client": "SSHHost",
              "bsdcrypt.ssh.openssh": "OpenSSHHost",
              "bsdcrypt.hosts.local": "LocalHost"}
HOST_FACTORY = {"bsdcrypt.hosts.open", "bsdcrypt.ssh"}
# Where modules lived before issue 10 moved them (new home in the comment); names that moved out of a module.
OLD_HOMES = {
    "bsdcrypt.host": "hosts/",
    "bsdcrypt.verbose": "hosts/verbose.py",
    "bsdcrypt.report": "render/status.py",
    "bsdcrypt.prometheus": "render/prometheus.py",
    "bsdcrypt.plan": "enable/plan.py",
    "bsdcrypt.act": "enable/act.py, enable/remote.py",
    "bsdcrypt.commands": "cli/",
    "bsdcrypt.bench.signals": "interrupts.py",
    # issue 29, the second step
    "bsdcrypt.render.text": "text.py",
    "bsdcrypt.hosts.base": "hostapi.py",
    "bsdcrypt.hosts.spec": "hostspec.py",
    "bsdcrypt.loaderconf": "loader/conf.py",
    "bsdcrypt.loadermodel": "loader/model.py",
    "bsdcrypt.advice": "assess/findings.py",
    "bsdcrypt.userland.assess": "assess/userland.py",
    "bsdcrypt.userland.ia32cap": "parsers/ia32cap.py",
    "bsdcrypt.paste": "collect/paste.py",
    "bsdcrypt.analyze": "collect/analyze.py",
    "bsdcrypt.assess.core": "assess/ by subject (os, cpu, driver, persist, geli, linux, paste)",
}
OLD_NAMES = {("bsdcrypt.fleet", "REMEDIES"): "errors.py", ("bsdcrypt.recording", "ReplayHost"): "hosts/replay.py"} | {
    ("bsdcrypt.hostsfile", name): "hosts/spec.py" for name in ("SpecError", "MAX_NAME", "quote_value", "split_spec")
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str) -> Iterator[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import statement of module `name`."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            names = [a.name for a in node.names]
            yield base, names, node.lineno
            for n in names:  # `from bsdcrypt import verbose` imports a module
                if f"{base}.{n}" in MODULES:
                    yield f"{base}.{n}", [], node.lineno


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _names, _line in imports(m):
            if target in MODULES and target != m:
                edges[m].add(target)
    return edges


def layer(name: str) -> int:
    best, found = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best:
                best, found = len(p), i
    assert found >= 0, f"{name} is in no layer: add it to LAYERS (and docs/architecture.md)"
    return found


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer() -> None:
    assert len(MODULES) > 40
    for m in MODULES:
        layer(m)


@pytest.mark.slow
def test_no_import_cycle() -> None:
    found = cycles(graph())
    assert not found, f"import cycles: {[sorted(c) for c in found]}"


def package_of(name: str) -> str:
    """The room a module belongs to: its package under bsdcrypt, or the top-level module itself."""
    parts = name.split(".")
    return ".".join(parts[:2])


@pytest.mark.slow
def test_no_two_packages_import_each_other() -> None:
    rooms: dict[str, set[str]] = {}
    for m, targets in graph().items():
        rooms.setdefault(package_of(m), set()).update(package_of(t) for t in targets if package_of(t) != package_of(m))
    found = cycles({r: {t for t in ts if t in rooms} for r, ts in rooms.items()})
    assert not found, f"packages importing each other: {[sorted(c) for c in found]}"


# Modules still over the limit, each being split (issue 29): remove a name when its module is split.
STILL_LONG: set[str] = set()


def test_no_module_is_over_600_lines() -> None:
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 600 and m not in STILL_LONG}
    assert not long, long


@pytest.mark.slow
def test_imports_point_down_only() -> None:
    upward = [
        f"{MODULES[m].relative_to(PACKAGE.parent)}:{line}: {m} (layer {layer(m)}) imports {t} (layer {layer(t)})"
        for m in MODULES
        for t, _names, line in imports(m)
        if t in MODULES and layer(t) > layer(m)
    ]
    assert not upward, "\n".join(upward)


@pytest.mark.slow
def test_only_the_cli_imports_typer() -> None:
    found = [
        f"{m} imports {t}"
        for m in MODULES
        if not any(m == c or m.startswith(c + ".") for c in CLI)
        for t, _names, _line in imports(m)
        if t.split(".")[0] in ("typer", "click")
    ]
    assert not found, found


@pytest.mark.slow
def test_only_hosts_open_makes_hosts_of_every_kind() -> None:
    found = [
        f"{m}:{line} imports {kind} from {t}"
        for m in MODULES
        if m not in HOST_FACTORY
        for t, names, line in imports(m)
        for kind in [HOST_KINDS.get(t)]
        if kind is not None and kind in names
    ]
    assert not found, found


def _python_files() -> Iterator[Path]:
    root = PACKAGE.parent
    for top in ("bsdcrypt", "tests", "benchmarks"):
        yield from sorted((root / top).rglob("*.py"))


def test_the_old_homes_of_moved_modules_are_gone() -> None:
    still = [m for m in MODULES for old in OLD_HOMES if m == old or m.startswith(old + ".")]
    assert not still, still
    # a directory left with only an untracked __pycache__ (a worktree that ran before the moves) is no module
    dirs = [old for old in OLD_HOMES if any((PACKAGE.parent / old.replace(".", "/")).rglob("*.py"))]
    assert not dirs, dirs


@pytest.mark.slow
def test_nothing_imports_an_old_home() -> None:
    found = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[tuple[str, list[str]]] = []
            if isinstance(node, ast.Import):
                targets = [(a.name, []) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [a.name for a in node.names]
                targets = [(node.module, names)] + [(f"{node.module}.{n}", []) for n in names]
            for target, names in targets:
                for old, new in OLD_HOMES.items():
                    if target == old or target.startswith(old + "."):
                        found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {target} (now {new})")
                for (module, name), new in OLD_NAMES.items():
                    if target == module and name in names:
                        found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {module}.{name} (now {new})")
    assert not found, "\n".join(found)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(path: Path) -> Iterator[str]:
    """`from bsdcrypt.x import _y`, `x._y` on a bsdcrypt module or name imported from one,
    `monkeypatch.setattr(x, "_y", ...)` on one, and "bsdcrypt.x._y" strings (monkeypatch targets)."""
    tree = ast.parse(path.read_text(), str(path))
    ours: set[str] = set()  # local names bound to a bsdcrypt module (or something imported from one)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bsdcrypt":
            for a in node.names:
                if _private(a.name):
                    yield f"{node.lineno}: from {node.module} import {a.name}"
                ours.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            ours.update(a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "bsdcrypt")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if isinstance(node.value, ast.Name) and node.value.id in ours:
                yield f"{node.lineno}: {node.value.id}.{node.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setattr":
            args = node.args
            if (len(args) >= 2 and isinstance(args[0], ast.Name) and args[0].id in ours
                    and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str) and _private(args[1].value)):
                yield f"{node.lineno}: setattr({args[0].id}, {args[1].value!r})"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("bsdcrypt."):
            if any(_private(part) for part in node.value.split(".")) and " " not in node.value:
                yield f"{node.lineno}: {node.value!r}"


@pytest.mark.slow
def test_no_test_uses_a_private_name_of_bsdcrypt() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{use}"
        for path in _python_files()
        if not path.is_relative_to(PACKAGE)
        for use in private_uses(path)
    ]
    assert not found, "\n".join(found)


def test_the_private_name_check_sees_each_kind_of_use(tmp_path: Path) -> None:
    sample = tmp_path / "t.py"
    sample.write_text(
        "from bsdcrypt.enable import act\nfrom bsdcrypt.fleet.run import _x\nimport bsdcrypt.bench.state as st\n"
        "act._BODY\nst._MACHINE\nmonkeypatch.setattr(act, '_LOCK', 1)\nmonkeypatch.setattr('bsdcrypt.cli.bench._f', 1)\n"
        "act.WRITE_BODY\nhost._execute\nmonkeypatch.setattr(host, '_execute', 1)\n'bsdcrypt.__main__'\n"
    )
    assert sorted(use.split(":")[0] for use in private_uses(sample)) == ["2", "4", "5", "6", "7"]


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"a": {"b"}, "b": {"a"}}, [{"a", "b"}]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [{"a", "b", "c"}]),
        ({"a": {"b"}, "b": set(), "c": {"b"}}, []),
    ],
)
def test_the_cycle_finder_finds_cycles(edges: dict[str, set[str]], expected: list[set[str]]) -> None:
    assert cycles(edges) == expected


def test_the_walk_sees_function_level_and_relative_imports() -> None:
    seen = {t for t, _n, _l in imports("bsdcrypt.hosts.open")}
    assert {"bsdcrypt.recording", "bsdcrypt.ssh", "bsdcrypt.hostapi"} <= seen  # two of them inside a function
    assert "bsdcrypt.cli.app" in {t for t, _n, _l in imports("bsdcrypt.cli")}  # a package's own modules


# ---------------------------------------------------------------------------- SSH rests on libraries (issue 25)

# What speaking the SSH wire protocol takes: paramiko's message and packet layers, its key exchanges, and the
# raw ciphers/ECDH a home-made client needs. No bsdcrypt module may use them.
WIRE_MODULES = ("paramiko.message", "paramiko.packet", "paramiko.kex_", "paramiko.auth_handler",
                "paramiko.transport", "cryptography.hazmat.primitives.ciphers",
                "cryptography.hazmat.primitives.asymmetric.x25519", "cryptography.hazmat.primitives.asymmetric.ec")
WIRE_NAMES = {"Message", "Packetizer", "AESGCM", "X25519PrivateKey"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def paramiko_private_uses(source: str) -> list[str]:
    """Where `source` reaches into paramiko's private names: a private module or name imported from it,
    or (in a module that imports paramiko) an attribute with a leading underscore read or set on anything
    but the module's own objects (`self`, `cls`). Wire-protocol building blocks count too (WIRE_*)."""
    tree = ast.parse(source)
    found: list[str] = []
    uses_paramiko = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "paramiko":
                    uses_paramiko = True
                if any(_private(p) for p in alias.name.split(".")) and alias.name.startswith("paramiko"):
                    found.append(f"line {node.lineno}: import {alias.name}")
                if alias.name.startswith(WIRE_MODULES):
                    found.append(f"line {node.lineno}: import {alias.name} (wire protocol)")
        elif isinstance(node, ast.ImportFrom) and node.module:
            top = node.module.split(".")[0]
            if top == "paramiko":
                uses_paramiko = True
                if any(_private(p) for p in node.module.split(".")) or any(_private(a.name) for a in node.names):
                    found.append(f"line {node.lineno}: from {node.module} import a private name")
            if node.module.startswith(WIRE_MODULES) or (top in ("paramiko", "cryptography")
                                                        and any(a.name in WIRE_NAMES for a in node.names)):
                found.append(f"line {node.lineno}: from {node.module} import ... (wire protocol)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base = node.value
            if uses_paramiko and _private(node.attr) and not (isinstance(base, ast.Name) and base.id in ("self", "cls")):
                found.append(f"line {node.lineno}: .{node.attr}")
            if isinstance(base, ast.Name) and base.id == "paramiko" and node.attr in WIRE_NAMES:
                found.append(f"line {node.lineno}: paramiko.{node.attr} (wire protocol)")
    return found


@pytest.mark.slow
def test_no_module_touches_a_paramiko_private_name_or_speaks_the_wire_protocol() -> None:
    found = {m: uses for m, p in MODULES.items() if (uses := paramiko_private_uses(p.read_text()))}
    assert not found, found


def test_the_paramiko_check_sees_each_kind_of_use() -> None:
    cases = {
        "import paramiko\nt = paramiko.Transport(s)\nt._send_user_message(m)\n": 1,
        "import paramiko\nchan._event_pending()\n": 1,
        "from paramiko.packet import Packetizer\n": 1,
        "from paramiko import _version\n": 1,
        "import paramiko\nm = paramiko.Message()\n": 1,
        "from cryptography.hazmat.primitives.ciphers.aead import AESGCM\n": 1,
        "import paramiko\nself._x = 1\nt = paramiko.Transport(s)\nt.open_session()\n": 0,
        "x._private = 1\n": 0,  # a module that does not import paramiko is not this check's business
    }
    for source, expected in cases.items():
        assert len(paramiko_private_uses(source)) == expected, source
