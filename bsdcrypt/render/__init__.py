"""Renderers, one module per format (the HTML page and its SVG charts live here); text.py is the one
sanitizer of host text every text renderer uses."""
