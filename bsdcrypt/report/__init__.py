"""Moved to bsdcrypt.render.status: re-exported here until every branch has merged the move."""

from bsdcrypt.render.status import FORMATS, nagios, render, table, to_json, to_yaml

__all__ = ["FORMATS", "nagios", "render", "table", "to_json", "to_yaml"]
