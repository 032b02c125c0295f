"""One home for the metrics: the registry that names them, the readable reference
definitions (one case at a time, the oracle), the vectorised engine that computes
them for a whole run, and the summaries (means over cases, slices)."""
