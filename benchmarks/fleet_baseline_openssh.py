"""Baseline for benchmarks/fleet_bench.py's `--ssh openssh` run: the system ssh per host, a thread pool,
the probe as bsdcrypt sends it on stdin, nothing parsed. What `fleet-audit --ssh openssh` costs beyond
this is bsdcrypt's own work (framing, assessment, the report); what this costs is ssh's.

    python benchmarks/fleet_baseline_openssh.py HOSTS_FILE SSH_CONFIG PARALLEL
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from bsdcrypt.probe import build_script, new_token


def probe(line: str, config: str) -> int:
    user, _, rest = line.rpartition("@")
    host, _, port = rest.rpartition(":")
    argv = ["ssh", "-T", "-o", "BatchMode=yes", "-F", config, "-p", port, "-l", user or "root", host, "/bin/sh -s"]
    try:
        done = subprocess.run(argv, input=build_script(new_token()).encode(), capture_output=True, timeout=120,
                              check=False)
    except subprocess.TimeoutExpired:
        print(f"{line}: timeout", file=sys.stderr)
        return -1
    if done.returncode == 255:
        print(f"{line}: {done.stderr.decode(errors='replace').strip()[-200:]}", file=sys.stderr)
        return -1
    return len(done.stdout)


def main() -> None:
    hosts_file, config, parallel = sys.argv[1:4]
    lines = [ln.strip() for ln in open(hosts_file, encoding="utf-8") if ln.strip() and not ln.startswith("#")]
    with ThreadPoolExecutor(int(parallel)) as pool:
        sizes = list(pool.map(lambda ln: probe(ln, config), lines))
    failed = sum(1 for s in sizes if s < 0)
    print(f"{len(sizes)} hosts, {sum(s for s in sizes if s > 0)} bytes, {failed} failed")


if __name__ == "__main__":
    main()
