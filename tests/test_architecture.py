"""The shape of the package, derived from its source: imports run one way, from the
commands down through the layers (:data:`LAYERS`), with no cycle, and the repository's dvc.yaml is the pipeline a user
project runs (the packaged template) with each stage's pin on the ragvet release
replaced by exactly the modules the stage imports, so that editing a module re-runs
every stage it can change and no other (docs/architecture.md).

Run it as a script to print the import graph: ``python tests/test_architecture.py``;
``python tests/test_architecture.py dvc.yaml`` writes the repository's dvc.yaml.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src"
PACKAGE = SOURCE / "ragvet"
TEMPLATE = PACKAGE / "template"


def module_name(path: Path) -> str:
    """``src/ragvet/measures/engine.py`` -> ``ragvet.measures.engine``; a package's ``__init__`` is the package."""
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_paths() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py")) if TEMPLATE not in path.parents}


def imported_modules(node: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The package's modules one import statement loads (``from ragvet import x`` loads ``ragvet.x``)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        found = {f"{node.module}.{alias.name}" for alias in node.names} & modules.keys()
        return found or ({node.module} & modules.keys())
    return set()


def import_graph() -> dict[str, set[str]]:
    """Every module of ``ragvet`` and the modules of ``ragvet`` it imports anywhere in its
    body: function-level and type-checking imports count, since either can load code."""
    modules = module_paths()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = set().union(*(imported_modules(node, modules) for node in ast.walk(tree))) - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


# The layers, lowest first (docs/architecture.md, "The layers"): a module imports only from
# its own layer and the layers below it. An entry is a module or a package, which holds its
# submodules; a module's layer is that of the longest entry holding it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", ("ragvet.text",)),
    ("model", ("ragvet.errors", "ragvet.schema", "ragvet.settings", "ragvet.storage")),
    ("corpus", ("ragvet.chunking", "ragvet.evidence", "ragvet.splitting", "ragvet.formats")),
    ("retriever specs", ("ragvet.retrieval.specs", "ragvet.retrieval.models")),
    ("retrieval", ("ragvet.retrieval",)),
    ("measures", ("ragvet.measures",)),
    ("gating", ("ragvet.gating",)),
    ("reporting", ("ragvet.reporting",)),
    ("inputs", ("ragvet.inputs",)),
    ("project", ("ragvet.pinning", "ragvet.project", "ragvet.upgrade")),
    (
        "commands",
        (
            "ragvet.cli",
            "ragvet.commands",
            "ragvet.stages",
            "ragvet.freeze_labels",
            "ragvet.interop",
            "ragvet.relabel",
            "ragvet.tune_abstain",
        ),
    ),
)
ROOT_PACKAGE = "ragvet"  # its docstring only: in no layer, and it imports nothing


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of a module's layer; ``None`` when no entry holds it."""
    held = [
        (len(entry), index)
        for index, (_, entries) in enumerate(LAYERS)
        for entry in entries
        if module == entry or module.startswith(f"{entry}.")
    ]
    return max(held)[1] if held else None


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Each ``(module, target)`` where the module imports from a higher layer than its own, sorted."""
    return sorted(
        (name, target)
        for name, targets in graph.items()
        for target in targets
        if name != ROOT_PACKAGE and layer_of(target) > layer_of(name)
    )


def closure(graph: dict[str, set[str]], start: str) -> set[str]:
    """``start`` and every module it can load."""
    seen = {start}
    todo = [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def command_modules() -> set[str]:
    """Modules that define typer commands: the package's front door."""
    return {name for name, path in module_paths().items() if re.search(r"^import typer$", path.read_text(), re.M)}


def dvc_stages(path: Path = ROOT / "dvc.yaml") -> dict[str, dict]:
    """Each dvc.yaml stage's definition (a ``foreach`` stage's ``do``)."""
    stages = yaml.safe_load(path.read_text())["stages"]
    return {name: stage.get("do", stage) for name, stage in stages.items()}


def stage_module(stage: dict) -> str:
    """``ragvet chunk ...`` runs ``ragvet.stages.chunk``'s ``main`` (cli.py registers it as is)."""
    return "ragvet.stages." + re.match(r"ragvet ([a-z]+) ", stage["cmd"]).group(1)


PIN = "- requirements.txt"
PIN_NOTE = """\
# Each stage's code is the ragvet version pinned in requirements.txt: changing the pin
# re-runs every stage, and a stage run by another installed version stops (exit 2).
"""
SOURCE_NOTE = """\
# Here, in ragvet's own repository, each stage's code dependencies are instead the modules
# it imports (src/ragvet/...): written by `python tests/test_architecture.py dvc.yaml`.
"""


def repository_pipeline() -> str:
    """The template's text with each stage's pin replaced by its import closure, sorted."""
    graph = import_graph()
    modules = module_paths()
    text = (TEMPLATE / "dvc.yaml").read_text(encoding="utf-8")
    assert PIN_NOTE in text
    out, stage = [], None
    for line in text.replace(PIN_NOTE, SOURCE_NOTE).splitlines(keepends=True):
        if re.fullmatch(r"  [a-z]+:\n", line):
            stage = line.strip()[:-1]
        if line.strip() == PIN:
            indent = line[: len(line) - len(line.lstrip())]
            needed = closure(graph, f"ragvet.stages.{stage}")
            out += sorted(f"{indent}- {modules[name].relative_to(ROOT).as_posix()}\n" for name in needed)
        else:
            out.append(line)
    return "".join(out)


def test_the_import_graph_has_no_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_every_module_is_in_one_layer():
    graph = import_graph()
    assert sorted(name for name in graph if layer_of(name) is None) == [ROOT_PACKAGE]
    assert graph[ROOT_PACKAGE] == set()
    entries = [entry for _, names in LAYERS for entry in names]
    assert len(entries) == len(set(entries)) and set(entries) <= graph.keys()


def test_no_import_runs_up_a_layer():
    assert upward_imports(import_graph()) == []


def test_the_layer_check_finds_an_upward_import():
    """Planted: the ground imports the errors, and a retriever's spec imports the kinds' run code."""
    graph = import_graph()
    graph["ragvet.text.values"] = graph["ragvet.text.values"] | {"ragvet.errors"}
    graph["ragvet.retrieval.specs.bm25"] = graph["ragvet.retrieval.specs.bm25"] | {"ragvet.retrieval.kinds"}
    assert upward_imports(graph) == [
        ("ragvet.retrieval.specs.bm25", "ragvet.retrieval.kinds"),
        ("ragvet.text.values", "ragvet.errors"),
    ]


def test_checking_params_imports_no_retriever_run_and_loads_no_numpy():
    """Every stage checks the params it reads (inputs/params.py), so what that check imports
    is every stage's code: the retrievers' specs, never their runs."""
    needed = closure(import_graph(), "ragvet.inputs.params")
    assert sorted(name for name in needed if LAYERS[layer_of(name)][0] == "retrieval") == []
    code = (
        "import sys; from ragvet.inputs.params import validate_params; from ragvet.storage.files import read_params; "
        "validate_params(read_params('params.yaml')); print('numpy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_no_command_imports_another_command_and_no_domain_module_imports_a_command():
    graph = import_graph()
    commands = command_modules()
    assert {stage_module(stage) for stage in dvc_stages().values()} <= commands
    wrong = {(name, target) for name, targets in graph.items() for target in targets & commands if name != "ragvet.cli"}
    assert wrong == set()


# The libraries a module may import inside a function, and why: an optional extra, or a path
# few runs take. Everything else is imported at the top; the one laziness boundary is
# cli.py, which imports each command's module only when it runs (tests/test_cli.py).
DEFERRED = {
    "torch": "the dense extra",
    "faiss": "the dense extra",
    "sentence_transformers": "the dense extra",
    "transformers": "the dense extra",
    "tokenizers": "the dense extra: a budget that counts tokens",
    "psycopg": "the pgvector extra",
    "pgvector": "the pgvector extra",
    "ray": "the ray extra: engine: ray",
    "fsspec": "engine: ray's vector shards, in a folder or on S3",
    "pandas": "the chunk table a kind: python plugin receives",
    "bm25s": "BM25's run: the kinds table imports every kind's run module",
    "Stemmer": "BM25's stemmers, in its run and its spec's check",
    "matplotlib": "the HTML report's charts",
    "markdown_it": "the HTML report",
    "ruamel": "ragvet upgrade, and ragvet relabel's in-place edit of a YAML cases file",
    "rapidfuzz": "ragvet relabel's approximate search",
    "diff_match_patch": "ragvet relabel's review file",
    "statsmodels": "over a second to import, needed only when a family has p-values to correct",
    "dvc": "DVC's API costs a second: stale-result checks, other revisions, storage moves",
    "networkx": "the stage graph of a stale-result check, with DVC's API",
    "pyarrow": "a rare path: a table written in more than one row group (65,536 rows), a numbered run's kept ids",
}


def function_level_imports() -> list[tuple[str, int, str]]:
    """``(module, line, imported top-level package)`` of every import inside a function."""
    found = []
    for name, path in module_paths().items():
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        target = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                        found.append((name, node.lineno, target.split(".")[0]))
    return found


def test_a_function_level_import_is_an_optional_extra_or_a_rare_path_and_cli_is_the_one_boundary():
    found = function_level_imports()
    assert [
        f"{name}:{line} {target}" for name, line, target in found if name != "ragvet.cli" and target not in DEFERRED
    ] == []
    assert {target for name, _, target in found if name != "ragvet.cli"} == set(DEFERRED)  # no stale entry


def test_the_repository_runs_the_template_with_each_stage_depending_on_exactly_the_modules_it_imports():
    assert (ROOT / "dvc.yaml").read_text(encoding="utf-8") == repository_pipeline()


def test_every_template_stage_pins_the_release_and_names_its_module():
    for name, stage in dvc_stages(TEMPLATE / "dvc.yaml").items():
        assert "requirements.txt" in stage["deps"] and stage_module(stage) == f"ragvet.stages.{name}"


def test_the_report_depends_on_the_folders_evaluate_writes_into():
    """Folders, not one file per configuration: adding a configuration to params.yaml
    must not need an edit of the report stage."""
    assert {"metrics/cases", "metrics/slices"} <= set(dvc_stages()["report"]["deps"])


def main() -> None:
    """Print each module's imports, the cycles, the layers, and each stage's import closure; or, given
    ``dvc.yaml``, write the repository's pipeline from the template."""
    if sys.argv[1:] == ["dvc.yaml"]:
        (ROOT / "dvc.yaml").write_text(repository_pipeline(), encoding="utf-8")
        return
    graph = import_graph()
    for name in sorted(graph):
        print(f"{name} -> {', '.join(sorted(graph[name])) or '(nothing)'}")
    found = cycles(graph)
    print(f"\ncycles: {len(found)}", *(" -> ".join(cycle) for cycle in found), sep="\n")
    print("\nlayers, lowest first:")
    for index, (layer, _) in enumerate(LAYERS):
        print(f"{index} {layer}: {', '.join(sorted(name for name in graph if layer_of(name) == index))}")
    upward = upward_imports(graph)
    print(f"upward imports: {len(upward)}", *(f"{name} -> {target}" for name, target in upward), sep="\n")
    for name, stage in dvc_stages().items():
        print(f"{name}: {len(closure(graph, stage_module(stage)))} modules")


if __name__ == "__main__":
    sys.exit(main())


def test_the_code_passes_the_linter_and_the_formatter_as_configured():
    """pyproject's ruff settings hold for every Python file the project ships or runs,
    so a merge cannot bring back long lines, shadowed imports or unsorted imports."""
    folders = ["src", "tests", "benchmarks", "sample_systems", "plugins"]
    for command in (["check", "--output-format", "concise"], ["format", "--check"]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *command, *folders], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
