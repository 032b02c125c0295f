"""Rendering: the markdown and HTML report, its charts, and how figures are printed."""
