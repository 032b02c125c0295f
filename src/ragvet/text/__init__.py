"""The ground layer: text and values as they come in (YAML that keeps its lines, checks of
one scalar) and go out (escaping per output format, how figures print). It imports
nothing of ragvet's, so every other module may import it (docs/architecture.md)."""
