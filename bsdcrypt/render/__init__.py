"""Renderers: pure functions from the model (Status, a fleet run, a plan, a bench result) to text.

serialize.py   JSON and YAML as every command writes them
status.py      `status`: table, nagios, and the format switch
prometheus.py  node_exporter textfile metrics (status, fleet, bench)
fleet.py       fleet-audit's and analyze's table, CSV and document
plan.py        enable/disable's plan as text and as data
bench.py       bench's tables and charts
html.py        the self-contained HTML page (status, fleet, bench), with svg.py's charts and bars.py
"""
