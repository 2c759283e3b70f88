"""Renderers, one module per format (the HTML page and its SVG charts live here)."""
