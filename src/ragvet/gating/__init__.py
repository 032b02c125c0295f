"""The regression gate: the pure paired comparison, where its two sides are read from,
and its verdict, decided once and kept in a file."""
