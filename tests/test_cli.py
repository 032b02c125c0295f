"""The ``ragvet`` command starts fast: listing the commands loads no numerical library.

Start-up time itself is measured by ``benchmarks/startup.py`` (never asserted here);
what this test pins is its cause, the modules ``import ragvet.cli`` pulls in.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("numpy", "pandas", "polars", "scipy", "bm25s", "torch", "faiss", "sentence_transformers")


def test_importing_the_cli_loads_no_heavy_module():
    code = "import sys, json, ragvet.cli; print(json.dumps(sorted(m for m in sys.modules if '.' not in m)))"
    loaded = set(
        json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    )
    assert loaded.isdisjoint(HEAVY), sorted(loaded.intersection(HEAVY))
    assert "typer" in loaded  # the probe does see what the CLI imports


def test_every_stage_is_still_a_command():
    result = subprocess.run([sys.executable, "-m", "ragvet.cli", "--help"], check=True, capture_output=True, text=True)
    for command in ("validate", "chunk", "split", "retrieve", "evaluate", "report", "gate", "baseline", "import"):
        assert command in result.stdout
