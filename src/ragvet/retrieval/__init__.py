"""Retrievers: the kinds registry, ranking shared by every kind, dense encoders and their cache, fusion, plugins."""
