"""Retrievers: each kind's spec (``specs/``, no numpy) and run, the kinds table joining them, ranking shared
by every kind, model names, dense encoders and their cache, fusion, plugins."""
