"""`bsdcrypt userland`: OpenSSL on AES-NI when the hypervisor hides the flag (docs/userland.md).

derive (version, detected vector, value, echo check) -> trial (children that may die) -> measure
(openssl speed, before/after) -> instructions per service -> with --apply: plan (pure) -> act.
`--check` re-checks an applied value against the current vector and a trial; `--remove` takes it out.
The steps are bsdcrypt.userland.flow; this module checks the options, shows what the flow says, exits.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from bsdcrypt.cli.options import HostOpt, SSHOpt, nonempty

FORMATS = ("text", "json")


def userland(
    host: HostOpt = "local",
    ssh: SSHOpt = "paramiko",
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
    from bsdcrypt.userland import flow
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
    h = parse_host_spec(host, ssh)
    if not h.can_exec:
        fail(f"{h.spec} is a recording: the trial and the measurement need a live host (local or SSH)")
    doc: dict[str, Any] = {"host": h.name, "service": service}
    text: list[str] = []

    from bsdcrypt.text import visible

    def out(line: str = "") -> None:
        line = visible(line, None)  # values read from files: no raw controls (bsdcrypt.text, the one sanitizer)
        text.append(line)
        if fmt == "text":
            typer.echo(line)

    def on_plan(plan: Any) -> None:
        from bsdcrypt.render.plan import plan_to_dict, render_plan

        doc["plan"] = plan_to_dict(plan)
        if fmt == "text":
            typer.echo(render_plan(plan, h.name), nl=False)

    talk = flow.Talk(out=out, on_plan=on_plan, confirm=lambda: typer.confirm("Apply these changes?", default=False),
                     can_ask=sys.stdin.isatty() and fmt != "json", warn=lambda line: typer.echo(line, err=True))

    try:
        if init and init not in ("rc", "systemd"):
            fail("--init is rc or systemd")
        if init and not root:
            fail("--init only applies with --root DIR (the running host's init system is detected)")
        system = init or flow.detect_system(h)
        name = "tor@default" if system != "rc" and service == "tor" else service
        try:
            unit = uplan.check_service(name, "rc" if system == "rc" else "systemd")
        except uplan.PlanError as exc:
            fail(str(exc))
        doc.update(system=system, unit=unit)
        paths = flow.rc_paths(h, unit, root) if system == "rc" else [uplan.dropin_path(unit, root)]
        files = flow.read_files(h, paths) if system != "sysv" else []
        current, current_env = flow.current_value(system, unit, files, root)
        doc["current"] = current
        if check or remove:
            code = flow.check_or_remove(h, talk, doc, system, unit, current, files, openssl, check, remove,
                                        dry_run, yes, root)
            raise typer.Exit(code)
        result = flow.derive_prove_measure(h, out, doc, system, unit, openssl, simulate_hidden, bench, rounds, seconds,
                                     current_env)
        if result is not None:
            raise typer.Exit(result)
        if apply:
            code = flow.apply(h, talk, doc, system, unit, doc["value"], files, dry_run, yes, root)
            raise typer.Exit(code)
    except UserlandError as exc:
        doc["error"] = str(exc)
        if fmt == "json":
            typer.echo(json.dumps(doc, indent=2))
        fail(f"refused: {exc}", flow.EXIT_REFUSED)
    except BsdcryptError as exc:
        fail(str(exc))
    finally:
        h.close()
        if fmt == "json" and "error" not in doc:
            typer.echo(json.dumps(doc, indent=2))


def register(app: typer.Typer) -> None:
    app.command("userland")(userland)
