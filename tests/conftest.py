"""Suite-wide settings.

Hypothesis: no per-example deadline and no too-slow health check. The machines that run this suite are
often heavily loaded, and a property test must fail on a wrong answer, never on a slow one.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("loaded-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("loaded-machine")
