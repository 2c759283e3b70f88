"""Reading a host through `host.run`: the sh library the reads and the safe write share (`resolve_lib()`:
every path resolved inside --root DIR the way chroot would), the loader files and what system is at
--root DIR, and where a path really is. Nothing here writes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

from bsdcrypt.errors import ActError
from bsdcrypt.hostapi import Host, sh_quote
from bsdcrypt.loader import conf as loaderconf
from bsdcrypt.probe import (
    CONF_DIR_GLOBS,
    FRAME_FUNCTION,
    MAX_FILE_BYTES,
    READ_FUNCTION,
    File,
    new_token,
    parse_output,
)

# ---- symbolic links ---------------------------------------------------------------------------------

# resolve PATH: print where PATH really is, every component resolved the way the system at $ROOT would
# see it, i.e. as chroot($ROOT) would (like sysrc -R): one component at a time, so the host never
# follows a link of the tree itself, be it on the last component or on one before it (DIR/boot ->
# /boot, DIR/boot -> bootpool/boot, ...). An absolute link target starts again at $ROOT; `..` never
# climbs above $ROOT (exit 2: refused, it leads outside); more than 32 links (SYMLOOP_MAX) is a loop
# (exit 1); a link that cannot be read or `..` after a non-directory is exit 3. The path printed is
# physical ($ROOT itself through `pwd -P`) and holds no symbolic link, so whatever is done with it
# (read, backup, temp file, lock, rename) stays inside $ROOT. PATH must be $ROOT/...; without a root
# ($ROOT empty) it is an absolute path on the host, resolved the same way (`..` stops at /).
# `unresolved RC` says why resolve failed, in one line without the path. (sh/resolve.sh)


@functools.cache
def shell_text(name: str) -> str:
    """The text of one of the sh files shipped in bsdcrypt/enable/sh/ (package data)."""
    return (resources.files("bsdcrypt.enable") / "sh" / name).read_text(encoding="utf-8")


def resolve_lib() -> str:
    """`resolve` and `unresolved` (sh/resolve.sh), for the scripts that read the host."""
    return shell_text("resolve.sh")


# ---- reading ---------------------------------------------------------------------------------------


MAX_LOADER_PATHS = 64  # files and directories a loader configuration may name before bsdcrypt gives up


def _read_round(host: Host, root: str, paths: list[str], dirs: list[str]) -> list[tuple[str, bytes]]:
    """One round trip: the files `paths` and the *conf entries of the directories `dirs` (loader paths),
    each resolved inside `root`; a file that is not there is left out."""
    token = new_token()
    lines = [
        f"T={token}; ROOT={sh_quote(root)}",
        resolve_lib(),
        FRAME_FUNCTION,
        READ_FUNCTION,
        # r PATH: a step named PATH (as under DIR) with the content of the file it resolves to; no
        # step (no file) when it resolves to nothing, a dangling link: the loader reads no file there
        # (a device, a FIFO or more than 1 MiB: one line, nothing read; probe.READ_FUNCTION)
        'r() { if t=$(resolve "$1") && [ ! -e "$t" ]; then return 0; fi; '
        's "$1" \'t=$(resolve "$1") || { unresolved $?; exit 1; }; bsdcrypt_read "$t"\'; }',
        # e PATH: r PATH if it is there; a link counts even dangling or looping (a loop is an error
        # to report, not a missing file). Only the last component is tested, in its resolved directory.
        'e() { d=$(resolve "${1%/*}") || { r "$1"; return; }; '
        '{ [ -L "$d/${1##*/}" ] || [ -e "$d/${1##*/}" ]; } && r "$1"; }',
        # n PATH: a file a loader file names: read only if it resolves to a regular file (a device
        # or FIFO is nothing the loader reads at boot, and cat would never end), at most 1 MiB
        'n() { t=$(resolve "$1") || { r "$1"; return; }; [ -f "$t" ] && '
        's "$1" \'bsdcrypt_read "$t"\'; }',
    ]
    standard = {loaderconf.LOADER_CONF, loaderconf.LOADER_CONF_LOCAL}
    lines += [f"{'e' if p in standard else 'n'} {sh_quote(root + p)}" for p in paths]
    for directory in dirs:
        # the globs (config.lua's ".conf$", hidden names too) run in the resolved directory; the steps
        # keep the names under DIR
        d = sh_quote(root + directory)
        globs = " ".join(f'"$d"/{g}' for g in CONF_DIR_GLOBS)
        lines.append(
            f"if d=$(resolve {d}); then "
            f'for x in {globs}; do {{ [ -L "$x" ] || [ -f "$x" ]; }} && r {d}/"${{x##*/}}"; done; '
            f"else r {d}; fi"
        )
    lines += ['printf \'%s begin .\\n\\n%s end . 0\\n\' "$T" "$T"', "exit 0"]
    res = host.run("\n".join(lines), timeout=60)
    ev = parse_output(res.stdout, token)
    out: list[tuple[str, bytes]] = []
    for path, st in ev.steps.items():
        if path == ".":
            continue
        if not st.ok:
            raise ActError(
                f"cannot read {path}: {st.text.strip().splitlines()[-1] if st.text.strip() else 'error'}"
            )
        if len(st.out) > MAX_FILE_BYTES:  # checked before anything parses it
            raise ActError(f"{path} is larger than 1 MiB: not a loader configuration bsdcrypt will read")
        out.append((path, st.out))
    return out


def read_loader_files(host: Host, root: str = "") -> list[tuple[str, bytes]]:
    """Every file the loader may read under `root` (like sysrc -R), in loader order: loader.conf,
    loader.conf.local, device.hints, loader.conf.d, and whatever files and directories their
    loader_conf_files / loader_conf_dirs / local_loader_conf_files name (in any loader generation),
    followed round trip by round trip (a few at most)."""
    from bsdcrypt.loader.model import DEVICE_HINTS, needed, outcomes

    root = root.rstrip("/")
    paths = [loaderconf.LOADER_CONF, loaderconf.LOADER_CONF_LOCAL, DEVICE_HINTS]
    dirs = [loaderconf.LOADER_CONF_DIR]
    files = dict(_read_round(host, root, paths, dirs))
    asked, listed = set(paths), set(dirs)
    for _ in range(6):
        outs = [o for major in (None, 12, 11) for o in outcomes(files.items(), "aesni", major, root)]
        want, want_dirs = needed(outs)
        new = sorted(p for p in want if p not in asked)
        new_dirs = sorted({d.rstrip("/") or "/" for d in want_dirs} - listed)
        if not new and not new_dirs:
            return loaderconf.loader_order(list(files.items()))
        if len(asked) + len(listed) + len(new) + len(new_dirs) > MAX_LOADER_PATHS:
            break
        bad = next((p for p in new + new_dirs if not p.startswith("/") or "\n" in p), None)
        if bad is not None:
            raise ActError(f"the loader configuration names {bad!r}, which is not an absolute path bsdcrypt can read")
        files.update(_read_round(host, root, new, new_dirs))
        asked.update(new)
        listed.update(new_dirs)
    raise ActError(
        f"the loader configuration under {root or '/'} names more than {MAX_LOADER_PATHS} files and directories "
        "(loader_conf_files, loader_conf_dirs): not one bsdcrypt will follow"
    )


def real_paths(host: Host, paths: list[str], root: str = "") -> dict[str, str]:
    """Where each of `paths` really is, every link resolved as `resolve_lib()` does (inside DIR with
    --root), in one round trip. A path that cannot be resolved is left out (reading or writing it
    reports why)."""
    root = root.rstrip("/")
    token = new_token()
    lines = [f"T={token}; ROOT={sh_quote(root)}", resolve_lib(), FRAME_FUNCTION]
    lines += [f"s {sh_quote(p)} {sh_quote('resolve ' + sh_quote(p))}" for p in paths]
    lines += ['printf \'%s begin .\\n\\n%s end . 0\\n\' "$T" "$T"', "exit 0"]
    ev = parse_output(host.run("\n".join(lines), timeout=60).stdout, token)
    out: dict[str, str] = {}
    for path, st in ev.steps.items():
        text = st.out.decode("utf-8", "replace")
        if path != "." and st.ok and text.endswith("\n") and text.count("\n") == 1:
            out[path] = text[:-1]
    return out


def check_root(host: Host, root: str) -> None:
    """`--root DIR` must be a directory holding boot/ (the root of a FreeBSD system); ActError otherwise.

    Checked up front, for --dry-run too, so a typo in DIR is one clear line and not a plan that would
    create DIR/boot/loader.conf in a directory that does not exist.
    """
    base = root.rstrip("/") or "/"
    script = (
        f"R={sh_quote(base)}; if [ ! -e \"$R\" ]; then echo missing; elif [ ! -d \"$R\" ]; then echo notdir; "
        'elif [ ! -L "$R/boot" ] && [ ! -d "$R/boot" ]; then echo noboot; else echo ok; fi'
    )
    answer = host.run(script, timeout=30).stdout.decode("utf-8", "replace").strip()
    if answer == "missing":
        raise ActError(f"--root {root}: no such directory")
    if answer == "notdir":
        raise ActError(f"--root {root}: not a directory")
    if answer == "noboot":
        raise ActError(
            f"--root {root}: no boot/ directory there, so it is not the root of a FreeBSD system (not mounted?)"
        )
    if answer != "ok":
        raise ActError(f"--root {root}: cannot check the directory on {host.name}")


# ELF e_machine of DIR/boot/kernel/kernel -> hw.machine_arch (FreeBSD's architectures; elf(5) EM_*)
_ELF_MACHINES = {
    3: "i386", 62: "amd64", 183: "aarch64", 40: "armv7", 243: "riscv64", 20: "powerpc", 21: "powerpc64",
    8: "mips", 43: "sparc64",
}


def _kernel_arch(header: str | None, where: str) -> tuple[str | None, str | None]:
    """(machine_arch, None) from the first 20 bytes of a kernel as `od -An -tx1` prints them, or
    (None, why it is not a FreeBSD kernel); (None, None) when there is no kernel file."""
    if header is None:
        return None, None
    b = [int(x, 16) for x in header.split()]
    if b[:4] != [0x7F, 0x45, 0x4C, 0x46] or len(b) < 20:  # \x7fELF
        return None, f"{where} is not an ELF file, so not a FreeBSD kernel"
    little = b[5] == 1  # EI_DATA: 1 little-endian, 2 big-endian
    machine = b[18] | b[19] << 8 if little else b[19] | b[18] << 8
    arch = _ELF_MACHINES.get(machine)
    if arch == "powerpc64" and little:
        arch = "powerpc64le"
    if arch is None:
        return None, f"{where} is an ELF kernel for machine {machine}, not an architecture FreeBSD runs on"
    return arch, None


# The files that tell a product (appliance) built on FreeBSD, as the probe reads them on a running host
# (bsdcrypt.probe.FILES, the opnsense-version step): here read under DIR.
_PRODUCT_FILES = (File.PLATFORM, File.VERSION, File.PFSENSE_RELEASE)
# opnsense-version(8) reads product_name/product_version/... from this JSON file (core since 21.x,
# opnsense before); the line it prints is what parse_product understands.
_OPNSENSE_VERSION_FILES = ("/usr/local/opnsense/version/core", "/usr/local/opnsense/version/opnsense")


@dataclass(frozen=True)
class RootSystem:
    """What bsdcrypt reads about the system at --root DIR (not the running one)."""

    release: str | None  # USERLAND_VERSION of DIR/bin/freebsd-version
    arch: str | None  # from the ELF header of DIR/boot/kernel/kernel
    variant: str | None = None  # pfsense, opnsense, truenas, freenas, ghostbsd, ...; None: plain FreeBSD
    not_freebsd: str | None = None  # why DIR is not a FreeBSD-family system (a garbage or foreign kernel, nothing)


def opnsense_version_line(text: str) -> str | None:
    """What `opnsense-version` prints, "NAME VERSION (ARCH/FLAVOUR)", from its JSON version file."""
    import json
    import re

    fields: dict[str, str] = {}
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            # scalars only: str() of a deeply nested value would recurse as deep as the parser did
            fields = {str(k): str(v) for k, v in doc.items() if not isinstance(v, dict | list)}
    except (ValueError, RecursionError):  # what the script itself does: "key": "value" pairs, one a line
        fields = dict(re.findall(r'"([a-z_]+)"\s*:\s*"([^"]*)"', text))
    name, version = fields.get("product_name"), fields.get("product_version")
    if not name or not version:
        return None
    return f"{name} {version} ({fields.get('product_arch') or 'unknown'}/{fields.get('product_flavour') or 'unknown'})"


def read_root_system(host: Host, root: str) -> RootSystem:
    """The system at `root`: its freebsd-version(1) script's USERLAND_VERSION, the ELF machine of its
    /boot/kernel/kernel, and the product its own version files name (pfSense, OPNsense, TrueNAS...).
    One round trip; files are read through links the way `read_loader_files` does (inside DIR)."""
    from bsdcrypt.parsers.osrelease import parse_product

    base = root.rstrip("/")
    token = new_token()
    lines = [
        f"T={token}; ROOT={sh_quote(base)}",
        resolve_lib(),
        FRAME_FUNCTION,
        READ_FUNCTION,
        "s release "
        + sh_quote(
            f"t=$(resolve {sh_quote(base + '/bin/freebsd-version')}) && "
            "sed -n 's/^USERLAND_VERSION=\"\\(.*\\)\"$/\\1/p' \"$t\" 2>/dev/null | head -n 1"
        ),
        "s kernel "
        + sh_quote(
            f"t=$(resolve {sh_quote(base + '/boot/kernel/kernel')}) && [ -f \"$t\" ] && od -An -tx1 -N20 \"$t\""
        ),
    ]
    for path in _PRODUCT_FILES + _OPNSENSE_VERSION_FILES:
        read = f't=$(resolve {sh_quote(base + path)}) && [ -f "$t" ] && bsdcrypt_read "$t"'
        lines.append(f"s {sh_quote(path)} {sh_quote(read)}")
    lines += ['printf \'%s begin .\\n\\n%s end . 0\\n\' "$T" "$T"', "exit 0"]
    ev = parse_output(host.run("\n".join(lines), timeout=30).stdout, token)

    def text(name: str) -> str | None:
        st = ev.steps.get(name)
        return st.out.decode("utf-8", "replace") if st is not None and st.ok else None

    release = (text("release") or "").strip() or None
    arch, not_freebsd = _kernel_arch(text("kernel"), f"{base}/boot/kernel/kernel")
    if arch is None and not_freebsd is None and release is None:
        not_freebsd = "it has neither a kernel (boot/kernel/kernel) nor a userland (bin/freebsd-version)"
    opnsense = next(
        (line for f in _OPNSENSE_VERSION_FILES if (t := text(f)) and (line := opnsense_version_line(t))), None
    )
    product = parse_product(
        text(File.PLATFORM), text(File.VERSION), opnsense, None, text(File.PFSENSE_RELEASE)
    )
    return RootSystem(release, arch, product.variant if product else None, not_freebsd)
