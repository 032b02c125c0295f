"""YAML that remembers line numbers, so that every problem can name its line."""

from __future__ import annotations

from typing import Any

from stages.errors import Problem


class LocatedDict(dict):
    """A YAML mapping that knows its 1-based ``line`` and each key's line."""

    line: int = 0
    key_lines: dict[Any, int]


class LocatedList(list):
    """A YAML sequence that knows its 1-based ``line`` and each item's line."""

    line: int = 0
    item_lines: list[int]


def _located_loader() -> type:
    """A SafeLoader that records lines and duplicate keys and leaves dates as text.

    PyYAML keeps the last of two equal keys without a word, and turns
    ``2026-01-05`` into a ``date``, which is not a JSON scalar: both would
    silently change what the user wrote.
    """
    import yaml  # pyyaml loads on first use, not for `ragvet --help`

    class Loader(yaml.SafeLoader):
        def __init__(self, stream: str):
            super().__init__(stream)
            self.duplicates: list[tuple[Any, int, int]] = []

    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_map(loader: Any, node: Any):
        data = LocatedDict()
        data.line = node.start_mark.line + 1
        data.key_lines = {}
        yield data
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            try:
                if key in data.key_lines:
                    loader.duplicates.append((key, data.key_lines[key], key_node.start_mark.line + 1))
                else:
                    data.key_lines[key] = key_node.start_mark.line + 1
            except TypeError:  # an unhashable key: construct_mapping reports it below
                pass
        data.update(loader.construct_mapping(node))

    def construct_seq(loader: Any, node: Any):
        data = LocatedList()
        data.line = node.start_mark.line + 1
        data.item_lines = [item.start_mark.line + 1 for item in node.value]
        yield data
        data.extend(loader.construct_sequence(node))

    Loader.add_constructor("tag:yaml.org,2002:map", construct_map)
    Loader.add_constructor("tag:yaml.org,2002:seq", construct_seq)
    return Loader


_LOADER: type | None = None


def load_located_yaml(text: str, where: str, line_offset: int = 0) -> tuple[Any, list[Problem]]:
    """Parse YAML text into :class:`LocatedDict`/:class:`LocatedList` values.

    Returns ``(value, problems)``: a syntax error (``value`` is ``None``) or
    duplicate keys. ``where`` is the file name; ``line_offset`` is added to every
    line, for YAML that starts further down a file (front matter).
    """
    import yaml  # pyyaml loads on first use, not for `ragvet --help`

    global _LOADER
    if _LOADER is None:
        _LOADER = _located_loader()
    loader = _LOADER(text)
    try:
        value = loader.get_single_data()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f"{where}:{mark.line + 1 + line_offset}" if mark else where
        reason = getattr(err, "problem", None) or str(err)
        context = getattr(err, "context", None)
        what = f"malformed YAML: {reason}" + (f" ({context})" if context else "")
        return None, [Problem(at, what, "fix the YAML syntax on that line (a value with ': ' or '#' needs quotes)")]
    finally:
        loader.dispose()
    problems = [
        Problem(
            f"{where}:{dup + line_offset}",
            f"key `{key}` appears twice in one mapping (first on line "
            f"{first + line_offset}); YAML would silently keep only the last",
            "remove or rename one of them",
        )
        for key, first, dup in loader.duplicates
    ]
    return value, problems


def line_of(value: Any, key: Any = None, default: int = 0) -> int:
    if isinstance(value, LocatedDict):
        if key is not None and key in value.key_lines:
            return value.key_lines[key]
        return value.line
    return default
