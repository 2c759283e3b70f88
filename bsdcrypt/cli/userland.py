"""`bsdcrypt userland`: OpenSSL on AES-NI when the hypervisor hides the flag (docs/userland.md).

derive (version, detected vector, value, echo check) -> trial (children that may die) -> measure
(openssl speed, before/after) -> instructions per service -> with --apply: plan (pure) -> act.
`--check` re-checks an applied value against the current vector and a trial; `--remove` takes it out.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from bsdcrypt.cli.options import HostOpt, nonempty

FORMATS = ("text", "json")
EXIT_WARNING = 1
EXIT_REFUSED = 2
FREEBSD_FAMILY = ("FreeBSD", "MidnightBSD")


def _mb(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e6:,.0f}"


def _system(host: Any) -> str:
    """rc (FreeBSD family), systemd, or sysv (Linux without systemd); UserlandError otherwise."""
    from bsdcrypt.userland.session import UserlandError

    res = host.run("uname -s; test -d /run/systemd/system && echo systemd; exit 0", timeout=30)
    lines = res.stdout.decode("utf-8", "replace").split()
    if lines and lines[0] in FREEBSD_FAMILY:
        return "rc"
    if lines and lines[0] == "Linux":
        return "systemd" if "systemd" in lines else "sysv"
    raise UserlandError(f"unsupported system {lines[0] if lines else '(no uname)'}: FreeBSD or Linux only")


def _rc_paths(host: Any, unit: str, root: str) -> list[str]:
    """rc_files in load_rc_config's order, a rc.conf.d/<svc> directory replaced by its files (sorted as
    sh's glob sorts them in the C locale)."""
    from bsdcrypt.hosts.base import sh_quote
    from bsdcrypt.userland import plan as uplan

    out = uplan.rc_files(unit, root)[:2]
    for d in uplan.rc_conf_d_dirs(unit, root):
        q = sh_quote(d)
        res = host.run(f"LC_ALL=C; if [ -d {q} ]; then for f in {q}/*; do [ -f \"$f\" ] && printf '%s\\n' \"$f\"; "
                       f"done; else printf '%s\\n' {q}; fi; exit 0", timeout=30)
        out += [ln for ln in res.stdout.decode("utf-8", "replace").splitlines() if ln.startswith(d)]
    return out


def _read_files(host: Any, paths: list[str]) -> list[tuple[str, bytes]]:
    from bsdcrypt.hosts.base import sh_quote

    out: list[tuple[str, bytes]] = []
    for p in paths:
        res = host.run(f"test -f {sh_quote(p)} && cat -- {sh_quote(p)}", timeout=30)
        if res.rc == 0:
            if len(res.stdout) > 1 << 20:
                from bsdcrypt.userland.session import UserlandError

                raise UserlandError(f"{p} is over 1 MiB: not a configuration file bsdcrypt edits")
            out.append((p, res.stdout))
    return out


def _current(system: str, unit: str, files: list[tuple[str, bytes]], root: str) -> tuple[str | None, str | None]:
    """(the service's current OPENSSL_ia32cap, its whole _env) from the files that hold it."""
    from bsdcrypt.userland import plan as uplan

    if system == "rc":
        last = uplan.find_last(files, f"{unit}_env")
        if last is None:
            return None, None
        value = next((w.split("=", 1)[1] for w in last.value.split() if w.startswith(uplan.VAR + "=")), None)
        return value, last.value
    for path, data in files:
        if path == uplan.dropin_path(unit, root):
            for line in data.decode("utf-8", "replace").splitlines():
                if line.startswith(f"Environment={uplan.VAR}="):
                    return line.split("=", 2)[2].strip(), None
    return None, None


def _render_trials(t: Any) -> list[str]:
    lines = [f"trial with OPENSSL_ia32cap={t.value} (children: no core dumps, timeout, cwd /tmp):"]
    for r in t.results:
        extra = "" if r.baseline_rc is None else f", without it exit {r.baseline_rc}"
        lines.append(f"  {r.verdict:<11} {r.what} (exit {r.rc}{extra})")
    if not t.timeout_tool:
        lines.append("  (no timeout(1) on the host: the host-side timeout is the only limit)")
    return lines


def _render_measure(m: Any) -> list[str]:
    before = "unset" if m.before_env is None else f"OPENSSL_ia32cap={m.before_env} (AES-NI masked: the simulation)"
    lines = [
        f"openssl speed, CPU-time mode, {m.rounds} interleaved rounds of {m.seconds} s, 16 KiB blocks, MB/s "
        "(median, spread):",
        f"  before: {before}",
        f"  after:  OPENSSL_ia32cap={m.after_env}",
    ]
    for c in m.ciphers:
        def sp(s: Any) -> str:
            return "" if s.spread is None else f" ±{s.spread * 50:.0f}%"

        gain = "" if c.gain is None else f"  {c.gain:.1f}x"
        lines.append(f"  {c.cipher:<18} {_mb(c.before.median):>8}{sp(c.before):<6} -> {_mb(c.after.median):>8}"
                     f"{sp(c.after):<6}{gain}")
    if m.noisy:
        lines.append("  NOISY: some runs got well under a full CPU or the rounds disagree; repeat with --rounds 5 "
                     "on a quieter moment before trusting the ratio")
    lines += [f"  failed: {f}" for f in m.failures]
    return lines


def userland(
    host: HostOpt = "local",
    service: Annotated[
        str, typer.Option("--service", "-s", help="The service to apply it to (rc.d name; systemd unit). "
                          "tor means tor@default on Linux.")
    ] = "tor",
    openssl: Annotated[
        str, typer.Option("--openssl", help="The openssl program of the service's libcrypto (default: from "
                          "ldd of the service binary).")
    ] = "",
    simulate_hidden: Annotated[
        bool, typer.Option("--simulate-hidden", help="On a CPU that shows AES-NI: mask it for the 'before' and "
                           "derive the value from the masked vector (a demo, OpenSSL 3.x).")
    ] = False,
    bench: Annotated[bool, typer.Option("--bench/--no-bench", help="Measure before/after with openssl speed.")] = True,
    rounds: Annotated[int, typer.Option("--rounds", help="Interleaved before/after rounds (median, spread).")] = 3,
    seconds: Annotated[int, typer.Option("--seconds", help="openssl speed seconds per run.")] = 1,
    apply: Annotated[bool, typer.Option("--apply", help="Write it for the service (diff, backup, atomic).")] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Re-check the service's applied value: current vector and a trial.")
    ] = False,
    remove: Annotated[
        bool, typer.Option("--remove", help="Take the service's OPENSSL_ia32cap out (with --check: only if "
                           "it no longer fits).")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", "-n", help="Show the diff; change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    root: Annotated[
        str | None,
        typer.Option(
            "--root", "-R", help="Edit the rc.conf / drop-in of a system (jail) mounted at DIR.", callback=nonempty
        ),
    ] = None,
    init: Annotated[
        str, typer.Option("--init", help="rc or systemd: the init system of the system at --root, when it is not "
                          "the running host's.")
    ] = "",
    fmt: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text",
) -> None:
    """Prove that OpenSSL can use AES-NI on a VM that hides the flag, measure it, and apply it per service.

    Computes OPENSSL_ia32cap from this host's own detected vector plus AES-NI and PCLMULQDQ only, in
    the syntax of the service's OpenSSL; proves it in child processes (a SIGILL means the CPU really
    lacks it: refused); measures before/after; prints how to apply it to one service, verify it and
    roll back; --apply writes it (rc.conf <svc>_env like sysrc, or a systemd drop-in). Exit status:
    0 done or nothing to do, 1 declined or (--check) a warning, 2 refused, 3 error.
    """
    from bsdcrypt.cli.options import fail
    from bsdcrypt.errors import BsdcryptError
    from bsdcrypt.hosts.open import parse_host_spec
    from bsdcrypt.userland import plan as uplan
    from bsdcrypt.userland.session import UserlandError

    root = root or ""  # no --root: the host itself (an empty -R '' is a usage error, never that)
    if fmt not in FORMATS:
        fail(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    if apply and (check or remove):
        fail("--apply sets the value; --check/--remove re-check or take it out: one at a time")
    if not 1 <= rounds <= 20 or not 1 <= seconds <= 30:
        fail("--rounds must be 1-20 and --seconds 1-30")
    if simulate_hidden and apply and not (dry_run or root):
        fail("--simulate-hidden is a demo on a CPU that shows AES-NI: with --apply only as --dry-run or into "
             "--root DIR, never onto this host's services")
    h = parse_host_spec(host)
    if not h.can_exec:
        fail(f"{h.spec} is a recording: the trial and the measurement need a live host (local or SSH)")
    doc: dict[str, Any] = {"host": h.name, "service": service}
    text: list[str] = []

    def out(line: str = "") -> None:
        line = "".join(c if c.isprintable() else "?" for c in line)  # values read from files: no raw controls
        text.append(line)
        if fmt == "text":
            typer.echo(line)

    try:
        if init and init not in ("rc", "systemd"):
            fail("--init is rc or systemd")
        if init and not root:
            fail("--init only applies with --root DIR (the running host's init system is detected)")
        system = init or _system(h)
        name = "tor@default" if system != "rc" and service == "tor" else service
        try:
            unit = uplan.check_service(name, "rc" if system == "rc" else "systemd")
        except uplan.PlanError as exc:
            fail(str(exc))
        doc.update(system=system, unit=unit)
        paths = _rc_paths(h, unit, root) if system == "rc" else [uplan.dropin_path(unit, root)]
        files = _read_files(h, paths) if system != "sysv" else []
        current, current_env = _current(system, unit, files, root)
        doc["current"] = current
        if check or remove:
            code = _check_or_remove(h, out, doc, system, unit, current, files, openssl, check, remove, dry_run,
                                    yes, root, fmt)
            raise typer.Exit(code)
        result = _derive_prove_measure(h, out, doc, system, unit, openssl, simulate_hidden, bench, rounds, seconds,
                                     current_env)
        if result is not None:
            raise typer.Exit(result)
        if apply:
            code = _apply(h, out, doc, system, unit, doc["value"], files, dry_run, yes, root, fmt)
            raise typer.Exit(code)
    except UserlandError as exc:
        doc["error"] = str(exc)
        if fmt == "json":
            typer.echo(json.dumps(doc, indent=2))
        fail(f"refused: {exc}", EXIT_REFUSED)
    except BsdcryptError as exc:
        fail(str(exc))
    finally:
        h.close()
        if fmt == "json" and "error" not in doc:
            typer.echo(json.dumps(doc, indent=2))


def _hypervisor(h: Any) -> str | None:
    from bsdcrypt.assess import assess
    from bsdcrypt.probe import gather

    try:
        s = assess(gather(h, timeout=120), h.name, h.spec)
    except Exception:  # the advice only loses its per-hypervisor wording
        return None
    if s.cpu.hypervisor or s.os.name != "Linux":
        return s.cpu.hypervisor
    res = h.run("systemd-detect-virt 2>/dev/null", timeout=30)  # Linux: kvm, qemu, vmware, microsoft, xen, ...
    virt = res.stdout.decode("utf-8", "replace").strip()
    return {"microsoft": "hv", "qemu": "qemu-tcg"}.get(virt, virt) if res.rc == 0 and virt != "none" else None


def _derive_prove_measure(
    h: Any, out: Any, doc: dict[str, Any], system: str, unit: str, openssl: str, simulate: bool, bench: bool,
    rounds: int, seconds: int, current_env: str | None,
) -> int | None:
    from bsdcrypt.userland import advice, ia32cap, measure, trial
    from bsdcrypt.userland.session import choose_openssl, derive

    prog, why = choose_openssl(h, unit, openssl or None)
    d = derive(h, prog, why, simulate_hidden=simulate)
    hv = _hypervisor(h)
    doc.update(openssl=d.openssl, openssl_why=d.why_openssl, library=f"{d.version.library} {d.version.version}",
               grammar=d.lib.grammar, detected=ia32cap.format_value(d.detected), vector_from=d.vector_from,
               simulated=simulate, value=d.value, hypervisor=hv)
    out(f"openssl: {d.openssl} ({d.version.library} {d.version.version}; {d.why_openssl})")
    out(f"grammar: {d.lib.why}")
    out(f"detected vector ({'masked: --simulate-hidden' if simulate else 'variable unset'}, from {d.vector_from}): "
        f"{ia32cap.format_value(d.detected)}")
    if d.value is None:
        out("OpenSSL already sees AES-NI (bit 57) on this host: there is nothing to force.")
        doc["result"] = "nothing-to-do"
        return 0
    out(f"value: OPENSSL_ia32cap={d.value}   (this host's vector + AES-NI bit 57 + PCLMULQDQ bit 33, nothing else)")
    if d.echo_ok is False:
        out(f"refused: `version -c` with the value printed {ia32cap.format_value(d.echo or ())}, not the value with "
            "bit 57: this libcrypto does not take it as bsdcrypt expects")
        doc["result"] = "refused"
        return EXIT_REFUSED
    if d.echo_ok:
        out(f"echo check: `version -c` prints {ia32cap.format_value(d.echo or ())} (bit 57 set): the library took it")
    t = trial.run(h, d.openssl, d.value, d.before_env, old=d.lib.grammar == "sscanf")
    doc["trials"] = [{"name": r.name, "what": r.what, "rc": r.rc, "baseline_rc": r.baseline_rc, "verdict": r.verdict}
                     for r in t.results]
    for line in _render_trials(t):
        out(line)
    if not t.passed:
        bad = [r for r in t.results if r.verdict not in ("pass", "unavailable")]
        what = (f"{len(bad)} of {len(t.results)} trials did not pass ({', '.join(sorted({r.verdict for r in bad}))}; "
                f"the first: {bad[0].what})" if bad else "the AES trial did not run")
        for line in advice.refusal(hv, what):
            out(line)
        doc["result"] = "refused"
        return EXIT_REFUSED
    if bench:
        m = measure.run(h, d.openssl, d.before_env, d.value, rounds=rounds, seconds=seconds,
                        old=d.lib.grammar == "sscanf")
        doc["measurement"] = {
            "rounds": m.rounds, "seconds": m.seconds, "before_env": m.before_env, "after_env": m.after_env,
            "noisy": m.noisy, "failures": m.failures,
            "ciphers": [{"cipher": c.cipher, "before_bytes_per_s": c.before.bytes_per_s,
                         "after_bytes_per_s": c.after.bytes_per_s, "before_median": c.before.median,
                         "after_median": c.after.median, "gain": c.gain,
                         "before_cpu_share": c.before.cpu_share, "after_cpu_share": c.after.cpu_share}
                        for c in m.ciphers],
        }
        for line in _render_measure(m):
            out(line)
    if system == "rc":
        how = advice.rc_instructions(unit, d.value, current_env, d.openssl)
    elif system == "systemd":
        how = advice.systemd_instructions(unit, d.value, d.openssl)
    else:
        how = advice.sysv_instructions(unit.split("@")[0], d.value)
    doc["instructions"] = how
    doc["better"] = advice.better(hv, unit)
    doc["result"] = "proved"
    out()
    for line in how + [""] + doc["better"]:
        out(line)
    return None


def _plan_and_act(h: Any, out: Any, doc: dict[str, Any], system: str, unit: str, value: str | None,
                  files: list[tuple[str, bytes]], dry_run: bool, yes: bool, root: str, fmt: str) -> int:
    from bsdcrypt.cli.enable import plan_to_dict, render_plan
    from bsdcrypt.enable.act import ActInterrupted, perform
    from bsdcrypt.errors import ActError
    from bsdcrypt.userland import plan as uplan

    if system == "sysv":
        out("--apply/--remove edit rc.conf (FreeBSD) or a systemd drop-in; this Linux has no systemd: edit "
            f"/etc/default/{unit.split('@')[0]} by hand (above)")
        return EXIT_REFUSED
    is_root = h.run("id -u", timeout=30).stdout.decode().strip() == "0" if not root else None
    plan = uplan.plan_apply(system, unit, value, files, vector=doc.get("detected", ""), root=root, is_root=is_root)
    doc["plan"] = plan_to_dict(plan)
    if fmt == "text":
        typer.echo(render_plan(plan, h.name), nl=False)
    if plan.refusal is not None:
        if dry_run and plan.refusal.needs_root:
            out("dry run: nothing changed (applying this needs root).")
            return 0
        return EXIT_REFUSED
    if not plan.changes_something:
        out("nothing to change.")
        return 0
    if dry_run:
        out("dry run: nothing changed.")
        return 0
    if not yes:
        if not sys.stdin.isatty() or fmt == "json":
            out("not changing anything without confirmation: re-run with --yes (or --dry-run to look)")
            return EXIT_REFUSED
        if not typer.confirm("Apply these changes?", default=False):
            out("nothing changed.")
            return 1
    if system == "systemd":
        from bsdcrypt.hosts.base import sh_quote

        d = plan.writes[0].edit.path.rsplit("/", 1)[0]
        res = h.run(f"mkdir -p -m 755 {sh_quote(d)}", timeout=30)
        if res.rc != 0:
            out(f"mkdir {d} failed: {res.stderr.decode('utf-8', 'replace').strip()[:200]}; nothing changed")
            return 3
    try:
        perform(h, plan, echo=lambda line: out(f"  {line}"), root=root)
    except ActInterrupted as exc:
        typer.echo(f"bsdcrypt: {exc}", err=True)
        return 130
    except ActError as exc:
        out(f"bsdcrypt: {exc}")
        return 3
    doc["applied"] = True
    return 0


def _apply(h: Any, out: Any, doc: dict[str, Any], system: str, unit: str, value: str | None,
           files: list[tuple[str, bytes]], dry_run: bool, yes: bool, root: str, fmt: str) -> int:
    if value is None:
        return 0
    out()
    return _plan_and_act(h, out, doc, system, unit, value, files, dry_run, yes, root, fmt)


def _check_or_remove(h: Any, out: Any, doc: dict[str, Any], system: str, unit: str, current: str | None,
                     files: list[tuple[str, bytes]], openssl: str, check: bool, remove: bool, dry_run: bool,
                     yes: bool, root: str, fmt: str) -> int:
    """--check: is the applied value still this host's vector + AES, and does a trial pass? --remove
    alone takes it out; --check --remove only when it no longer fits."""
    from bsdcrypt.userland import ia32cap, trial
    from bsdcrypt.userland.session import UserlandError, choose_openssl, derive

    if current is None:
        out(f"{unit} has no OPENSSL_ia32cap (looked in: {', '.join(p for p, _ in files) or 'no file exists'}).")
        doc["result"] = "no-override"
        return 0
    out(f"{unit}: OPENSSL_ia32cap={current}")
    bad = False
    if check:
        prog, why = choose_openssl(h, unit, openssl or None)
        hazard: str
        try:
            d = derive(h, prog, why)
            hazard, message = ia32cap.classify_override(current, d.detected, d.lib)
        except UserlandError as exc:
            hazard, message = "unknown", str(exc)
        out(f"vector check: {hazard}: {message}")
        t = trial.run(h, prog, current, None)
        for line in _render_trials(t):
            out(line)
        doc.update(hazard=hazard, trial_passed=t.passed)
        bad = hazard in ("stale", "plus", "no-0x") or not t.passed
        if not bad:
            out("the applied value still fits this host and its trial passes.")
            doc["result"] = "ok"
            return 0
        out("WARNING: " + ("the trial fails: the service would die with SIGILL; " if not t.passed else "")
            + ("remove it" if not remove else "removing it") + " (bsdcrypt userland --check --remove).")
        if not remove:
            doc["result"] = "warning"
            return EXIT_REFUSED if not t.passed else EXIT_WARNING
    code = _plan_and_act(h, out, doc, system, unit, None, files, dry_run, yes, root, fmt)
    doc["result"] = "removed" if doc.get("applied") else doc.get("result", "not-removed")
    return code if code else (EXIT_WARNING if bad else 0)


def register(app: typer.Typer) -> None:
    app.command("userland")(userland)
