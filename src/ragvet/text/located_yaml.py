"""YAML that remembers line numbers, so that every problem can name its line.

Its problems are plain :class:`YamlProblem` triples, which the reader turns into
:class:`ragvet.errors.Problem`: this module sits below the errors (docs/architecture.md).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import yaml

from ragvet.text.nesting import NESTING_FIX, TOO_DEEP


class YamlProblem(NamedTuple):
    """What is wrong with a YAML text, as :class:`ragvet.errors.Problem` takes it: ``Problem(*found)``."""

    where: str
    what: str
    fix: str


class LocatedDict(dict):
    """A YAML mapping that knows its 1-based ``line`` and each key's line."""

    line: int = 0
    key_lines: dict[Any, int]


class LocatedList(list):
    """A YAML sequence that knows its 1-based ``line`` and each item's line."""

    line: int = 0
    item_lines: list[int]


class WrittenInt(int):
    """A YAML integer written other than as its digits (``1_000``, ``+5``), which keeps
    that ``text``: as an id it is the text as written, not ``1000`` or ``5``."""

    text: str = ""


# YAML 1.1 reads `010` as 8, `0x1F` as 31 and `1:30` as 90, which silently rewrites
# an id such as `id: 010`. Only plain decimal numbers are numbers here; the other
# forms stay the text the user wrote. (PyYAML's own decimal and float patterns,
# without their octal, hexadecimal, binary and base-60 branches.)
_INT = r"^[-+]?(?:0|[1-9][0-9_]*)$"
_FLOAT = (
    r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?"
    r"|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_REPLACED = ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
ALIAS_FIX = "write the value out in full: ragvet's input files take no anchors (&name) or aliases (*name)"


def _located_loader() -> type:
    """A SafeLoader that records lines and duplicate keys, leaves dates and YAML 1.1
    number forms as text, and refuses anchors and aliases.

    PyYAML keeps the last of two equal keys without a word, and turns
    ``2026-01-05`` into a ``date``, which is not a JSON scalar: both would
    silently change what the user wrote. An alias expands to a copy of its
    anchor's value, so nine nested aliases make a billion values (the "billion
    laughs"): refusing them at the first anchor bounds the work by the file's size.
    """

    class Loader(yaml.SafeLoader):
        def __init__(self, stream: str):
            super().__init__(stream)
            self.duplicates: list[tuple[Any, int, int]] = []
            self.deepest: Any = None

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            self.deepest = event.start_mark  # where a RecursionError is reported: the node it reached last
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                name = event.anchor
                raise yaml.composer.ComposerError(
                    None, None, f"anchor or alias `{name}` is not accepted", event.start_mark
                )
            return super().compose_node(parent, index)

    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in _REPLACED]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    # What this loader reads, yaml.safe_dump must write back (tune-abstain, init):
    # the safe dumper knows dict and list, not their subclasses.
    yaml.SafeDumper.add_representer(LocatedDict, yaml.SafeDumper.represent_dict)
    yaml.SafeDumper.add_representer(LocatedList, yaml.SafeDumper.represent_list)
    yaml.SafeDumper.add_representer(WrittenInt, yaml.SafeDumper.represent_int)
    Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(_INT), list("-+0123456789"))

    def construct_int(loader: Any, node: Any) -> int:
        value = loader.construct_yaml_int(node)
        if isinstance(node.value, str) and node.value != str(value):
            value = WrittenInt(value)
            value.text = node.value
        return value

    Loader.add_constructor("tag:yaml.org,2002:int", construct_int)
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(_FLOAT), list("-+0123456789."))

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


def load_located_yaml(text: str, where: str, line_offset: int = 0) -> tuple[Any, list[YamlProblem]]:
    """Parse YAML text into :class:`LocatedDict`/:class:`LocatedList` values.

    Returns ``(value, problems)``: a syntax error (``value`` is ``None``) or
    duplicate keys. ``where`` is the file name; ``line_offset`` is added to every
    line, for YAML that starts further down a file (front matter).
    """
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
        fix = "fix the YAML syntax on that line (a value with ': ' or '#' needs quotes)"
        return None, [YamlProblem(at, what, ALIAS_FIX if "anchor or alias" in reason else fix)]
    except RecursionError:
        mark = loader.deepest
        at = f"{where}:{mark.line + 1 + line_offset}" if mark else where
        return None, [YamlProblem(at, f"malformed YAML: {TOO_DEEP}", NESTING_FIX)]
    finally:
        loader.dispose()
    problems = [
        YamlProblem(
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


_INDEX = re.compile(r"\[(\d+)\]\.?")


def key_path_line(value: Any, path: str) -> int:
    """The line of the deepest key of a key path such as ``gate.bootstrap.resamples``
    or ``ks[1]`` that ``value`` holds, 0 when none. Names may hold dots
    (``chunking.fixed-1.5``): the longest key that fits is taken."""
    line = 0
    while path and isinstance(value, (dict, list)):
        if isinstance(value, list):
            index = _INDEX.match(path)
            if index is None or int(index[1]) >= len(value):
                break
            if isinstance(value, LocatedList):
                line = value.item_lines[int(index[1])]
            value, path = value[int(index[1])], path[index.end() :]
            continue
        keys = [key for key in value if isinstance(key, str) and re.match(rf"{re.escape(key)}(?:$|[.\[])", path)]
        if not keys:
            break
        key = max(keys, key=len)
        line = line_of(value, key, line)
        value, path = value[key], path[len(key) :].removeprefix(".")
    return line
