"""The ``ragvet`` command: every subcommand by name, each module imported only when it runs.

Each pipeline stage is a subcommand (``ragvet chunk``, ...), its module's ``main``:
dvc.yaml runs them so, and a user can run one by hand exactly as dvc.yaml does. Before a
stage runs, the project's pinned release is checked (:mod:`ragvet.pinning`).

This is the one place where laziness is managed: ``ragvet --help`` lists the commands from
:data:`COMMANDS` without importing any of them (a test holds each summary equal to the
command's own help), and ``ragvet <command>`` imports that command's module alone, which
imports what it needs at its top.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

# name -> (module, attribute: a command function or a typer app, the summary `ragvet --help` shows)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "validate": ("ragvet.stages.validate", "main", "Validate every input and write the resolved corpus and cases."),
    "settings": (
        "ragvet.stages.settings",
        "main",
        "Resolve the optional sections of params.yaml and write one file for each.",
    ),
    "chunk": ("ragvet.stages.chunk", "main", "Chunk every document; ids are ``<doc_id>#<ordinal>``."),
    "split": ("ragvet.stages.split", "main", "Assign each case to eval or dev by a salted hash of its id."),
    "retrieve": (
        "ragvet.stages.retrieve",
        "main",
        "Write a run ``{case_id, rank, chunk_id, score}`` down to ``depth``.",
    ),
    "evaluate": ("ragvet.stages.evaluate", "main", "Score one configuration's run against the projected evidence."),
    "verdict": ("ragvet.stages.verdict", "main", "Decide the gate's verdict and write it."),
    "report": ("ragvet.stages.report", "main", "Write the report of every configuration against the baseline."),
    "gate": ("ragvet.stages.gate", "main", "Print the gate's verdict and exit 1 when it failed."),
    "baseline": ("ragvet.commands", "baseline_app", "Manage the committed baseline."),
    "import": (
        "ragvet.interop",
        "import_app",
        "Convert a BEIR folder, TREC topics and qrels, a SQuAD file or a search log into ragvet's inputs.",
    ),
    "export": (
        "ragvet.interop",
        "export_app",
        "Write a run or the chunk-level qrels as TREC files, for trec_eval, pytrec_eval or ranx.",
    ),
    "cache": ("ragvet.commands", "cache_app", "Manage ragvet's caches."),
    "tune-abstain": (
        "ragvet.tune_abstain",
        "main",
        "Sweep the top-1 score threshold on dev, pick it by RULE, record it.",
    ),
    "freeze-labels": (
        "ragvet.freeze_labels",
        "main",
        "Freeze chunk-anchored labels into spans, and store each span and quote label's anchor.",
    ),
    "relabel": (
        "ragvet.relabel",
        "main",
        "Re-anchor span and quote labels in documents that changed.",
    ),
    "init": (
        "ragvet.commands",
        "init",
        "Start a project on your own data: the pipeline, one first configuration, git and DVC.",
    ),
    "upgrade": (
        "ragvet.commands",
        "upgrade",
        "Pin the installed ragvet and bring the project to it, then re-run what changed.",
    ),
    "ann-recall": (
        "ragvet.commands",
        "ann_recall",
        "Measure how much of the exact top k an approximate index returns, per case and on average.",
    ),
    "verify": (
        "ragvet.commands",
        "verify",
        "Check that recomputed results reproduce the committed ones, within float noise.",
    ),
    "compare": (
        "ragvet.commands",
        "compare",
        "Every configuration against a baseline configuration on the eval split.",
    ),
    "migrate-storage": (
        "ragvet.commands",
        "migrate_storage_command",
        "Move the per-case tables, the split's membership and the baseline's tables from git to DVC.",
    ),
    "sample-for-labels": (
        "ragvet.commands",
        "sample_for_labels",
        "Write a stratified sample of the moved, unlabelled queries as cases, ready for annotation.",
    ),
    "metrics-doc": (
        "ragvet.commands",
        "metrics_doc_command",
        "Print the metrics documentation generated from the registry (docs/metrics.md).",
    ),
}
STAGES = ("validate", "chunk", "split", "retrieve", "evaluate", "verdict", "report", "gate")


def command(name: str) -> TyperCommand | TyperGroup:
    """The command ``ragvet <name>`` runs (typer's click object), its module imported now."""
    module, attribute, _ = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        found = typer.main.get_group(target)
    else:
        single = typer.Typer()
        single.command(name)(target)
        found = typer.main.get_command(single)
    found.name = name
    return found


class LazyGroup(TyperGroup):
    """A group that imports a command's module only to run it or to show its own help."""

    listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, name: str) -> TyperCommand | TyperGroup | None:
        if name not in COMMANDS:
            return None
        if self.listing:  # `ragvet --help`: the summary, nothing imported
            return TyperCommand(name, help=COMMANDS[name][2])
        return command(name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


app = typer.Typer(cls=LazyGroup, add_completion=False, no_args_is_help=True)


def _show_version(shown: bool) -> None:
    if shown:
        from ragvet.pinning import installed_version  # deferred: only --version reads the distribution

        typer.echo(f"ragvet {installed_version()}")
        raise typer.Exit()


@app.callback()
def pinned_release(
    context: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_show_version, is_eager=True, help="Print the version."),
) -> None:
    """Offline retrieval evaluation for RAG."""
    if context.invoked_subcommand in STAGES:  # a stage's outputs are recorded as the pinned release's
        from ragvet.pinning import refuse_another_release  # deferred: packaging, only for a stage

        refuse_another_release()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
