"""The documentation is generated where it can be and checked where it cannot:
the metrics page equals what the registry generates, the chunking table what the
chunking code generates, every command and every
registered metric is documented, and every relative link points at a file."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import click
import typer.main

from ragvet.chunking import STRATEGIES, strategies_doc
from ragvet.cli import app
from ragvet.inputs.corpus import load_corpus
from ragvet.measures.answers import REVIEW_METRICS
from ragvet.measures.registry import METRICS
from ragvet.reporting.metrics_doc import metrics_doc
from ragvet.text.escaping import md_text

ROOT = Path(__file__).resolve().parents[1]
# The README's two commands, which CI runs (.ci/run): the README opens with them, unchanged.
SET_UP_AND_RUN = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && "
    "pip install -r requirements-dense.lock && pip install --no-deps -e . && dvc repro"
)
RUN_THE_TESTS = ". .venv/bin/activate && pip install -r requirements-dev.lock && pytest"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def command_paths(command, prefix: str = "") -> list[str]:
    """``["baseline accept", "chunk", ..., "import beir", ...]``: every runnable command."""
    if hasattr(command, "list_commands"):  # a group of subcommands, the lazy top one included
        context = click.Context(command)
        return [
            path
            for name in command.list_commands(context)
            for path in command_paths(command.get_command(context, name), f"{prefix} {name}")
        ]
    return [prefix.strip()]


def test_the_metrics_page_is_what_the_registry_generates():
    assert (ROOT / "docs/metrics.md").read_text(encoding="utf-8") == metrics_doc()


def test_the_inputs_page_lists_every_chunking_strategy_and_its_keys_as_the_code_has_them():
    page = (ROOT / "docs/inputs.md").read_text(encoding="utf-8")
    assert strategies_doc() in page
    assert sorted(STRATEGIES) == ["document", "fixed", "markdown", "sentences"]
    for keys in ("`unit`", "`window`", "`overlap`", "`max_chars`"):
        assert keys in strategies_doc()


def test_every_registered_metric_is_documented():
    page = (ROOT / "docs/metrics.md").read_text(encoding="utf-8")
    for metric in [*METRICS.values(), *REVIEW_METRICS.values()]:
        cutoff = "B" if getattr(metric, "budget", False) else "k"  # budget metrics are cut at a budget B
        cell = md_text(metric.definition, limit=None)  # as a table cell shows it
        assert f"| `{metric.key(cutoff)}` | {cell} |" in page


def test_every_command_is_documented():
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    paths = command_paths(typer.main.get_group(app))
    assert {"baseline accept", "import beir", "export run", "validate", "metrics-doc"} <= set(paths)
    assert [path for path in paths if f"ragvet {path}" not in text] == []


def test_every_relative_link_points_at_a_file():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)[:2] == [SET_UP_AND_RUN, RUN_THE_TESTS]
    assert SET_UP_AND_RUN in (ROOT / ".ci/run").read_text(encoding="utf-8")


def test_the_where_things_are_table_names_functions_its_command_module_calls():
    """Each row's domain functions exist, and the row's command module imports each one from
    its module and uses it (calls it, or passes it on): a table naming a function only tests
    call would mislead."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| stage | command module | key domain function |") :].split("\n\n")[0]
    rows = [row.split(" | ") for row in table.splitlines()[2:]]
    assert len(rows) >= 10
    for row in rows:
        [path] = re.findall(r"`(src/ragvet/[\w/]+\.py)`", row[1])
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        imported = {
            (f"{node.module}.{alias.name}", alias.asname or alias.name)
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names
        }
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
        for dotted in re.findall(r"`((?:\w+\.)+\w+)`", row[2]):
            module, _, function = f"ragvet.{dotted}".rpartition(".")
            assert callable(getattr(importlib.import_module(module), function)), dotted
            assert (f"{module}.{function}", function) in imported and function in used, (path, dotted)


def test_the_front_matter_offsets_example_reads_as_the_corpus_loader_reads_it(tmp_path):
    """docs/inputs.md's span example: offsets count from after the front matter."""
    page = (ROOT / "docs" / "inputs.md").read_text(encoding="utf-8")
    example = re.search(r"In this file, .*?```text\n(.*?)```", page, flags=re.DOTALL)
    claimed = re.search(r"`\{doc: leave, start: (\d+), end: (\d+)\}` is `(\w+)`", page)
    top = re.search(r"from the top of the file it would be (\d+) to (\d+)", page)
    assert example and claimed and top
    (tmp_path / "leave.md").write_text(example[1], encoding="utf-8")
    (doc,) = load_corpus(tmp_path)
    start, end = int(claimed[1]), int(claimed[2])
    assert (doc.doc_id, doc.title, doc.text[start:end]) == ("leave", "Leave policy", claimed[3])
    assert example[1][int(top[1]) : int(top[2])] == claimed[3]
