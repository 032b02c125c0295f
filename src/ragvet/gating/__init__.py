"""The regression gate: the pure paired comparison, and where its two sides are read from."""
