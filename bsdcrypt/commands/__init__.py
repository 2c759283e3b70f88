"""CLI commands other than status/record; each module has `register(app)`."""
