"""fleet-audit: the `status` pipeline on every host of a hosts file, concurrently and bounded.

results.py   one row per host (HostResult), the run (FleetRun), the interrupt it reports
run.py       the Auditor (one host: open, probe, assess) and run_fleet (a thread pool, the deadline watchdog)
dupes.py     duplicate lines: set aside before the run, or found by the workers once the config is known
progress.py  the progress line on a terminal

Rendering is in bsdcrypt.render.fleet. The names below are this package's API.
"""

from bsdcrypt.fleet.progress import *  # noqa: F403
from bsdcrypt.fleet.results import *  # noqa: F403
from bsdcrypt.fleet.run import *  # noqa: F403
