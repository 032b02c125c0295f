"""The ``ragvet`` command starts fast: ``ragvet --help`` imports no command, and a command
imports its own module only.

Start-up time itself is measured by ``benchmarks/startup.py`` (never asserted here); what
these tests pin is its cause, the modules each start imports.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys

import pytest

from ragvet.cli import COMMANDS, STAGES, command

PROBE = (
    "import sys, json\nfrom ragvet.cli import app\ntry:\n    app({args})\nexcept SystemExit:\n    pass\n"
    "print(json.dumps(sorted(sys.modules)))"
)


def loaded_by(*args: str) -> set[str]:
    """The modules ``ragvet *args`` has imported when it ends (its own output dropped)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=list(args))], check=True, capture_output=True, text=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_listing_the_commands_imports_none_of_them_nor_any_numerical_or_yaml_library():
    loaded = loaded_by("--help")
    assert sorted(name for name in loaded if name.startswith("ragvet")) == ["ragvet", "ragvet.cli"]
    assert loaded.isdisjoint({"numpy", "polars", "pandas", "yaml", "orjson", "scipy", "torch", "dvc"})
    assert "typer" in loaded  # the probe does see what the CLI imports


def test_a_command_imports_its_own_module_and_not_the_others():
    loaded = loaded_by("split", "--help")
    assert "ragvet.stages.split" in loaded
    assert not {"ragvet.stages.retrieve", "ragvet.stages.report", "ragvet.commands", "ragvet.interop"} & loaded


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_listed_summary_is_the_first_sentence_of_the_commands_own_help(name):
    paragraph = " ".join(inspect.cleandoc(command(name).help or "").split("\n\n")[0].split())
    assert COMMANDS[name][2] == re.match(r"(.+?\.)(\s|$)", paragraph).group(1)


def test_every_stage_is_a_command_and_listed():
    result = subprocess.run([sys.executable, "-m", "ragvet.cli", "--help"], check=True, capture_output=True, text=True)
    assert set(STAGES) <= set(COMMANDS)
    for name in COMMANDS:
        assert f" {name} " in result.stdout
