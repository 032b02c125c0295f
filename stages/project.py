"""A new ragvet project on the user's own data, made from this repository's pipeline.

The bundled sample's outputs are not copied (no metrics, answers, thresholds or
baseline), because any of them would be read, or tracked, as if it belonged to the
new data (issue 13, traps 1, 2 and 5). What is copied is what dvc.yaml runs: the
``stages`` package (dvc.yaml lists its modules as code dependencies), the plugins
folder, the ignore patterns for DVC's cached outputs and the plot templates.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from stages.errors import Problem, raise_if
from stages.inputs.loading import CASE_SUFFIXES
from stages.storage.files import read_params

SOURCE = Path(__file__).resolve().parents[1]
# Files and folders copied as they are, relative to SOURCE.
PIPELINE_FILES = ["dvc.yaml", ".gitignore", "plugins/__init__.py", "data/answers/README.md"]
# Folders dvc.yaml depends on that must exist, empty, from the start (git keeps them by .gitkeep).
KEPT_FOLDERS = ["data/external", "metrics/baseline"]
NEXT_STEPS = """\
Next steps, in {target}:
  1. Add your data (skip what you passed to ragvet init):
       ragvet import beir|trec|squad ... --out-corpus data/corpus --out-cases data/cases/cases.yaml
     or copy documents into data/corpus/ and one cases.yaml or cases.jsonl into data/cases/.
  2. dvc repro report          # every stage up to the report; no baseline exists yet
  3. ragvet baseline accept    # the first results become the baseline
  4. dvc repro                 # the gate now compares with that baseline
  5. git add -A && git commit -m "First ragvet baseline"
Then change params.yaml, `dvc repro`, and read metrics/report.md (README: "Your own data")."""


def first_params(sample: dict) -> dict:
    """The sample's knobs narrowed to one chunking and one BM25 configuration, gated,
    with no slices (they name the sample's tags), gating the metrics every retrieval case
    has: claim and answer metrics have no value until cases carry claims and answers do."""
    config = sample["gate"]["configs"][0]
    chunking = sample["configs"][config]["chunking"]
    params = {key: sample[key] for key in ("depth", "ks", "evidence", "budget", "judged")}  # dvc.yaml declares each
    params["chunking"] = {chunking: sample["chunking"][chunking]}
    params["retrievers"] = {"bm25": sample["retrievers"]["bm25"]}
    params["configs"] = {config: {"chunking": chunking, "retriever": "bm25"}}
    params["split"] = {"salt": "ragvet-v1", "eval_fraction": sample["split"]["eval_fraction"]}
    params["slices"] = []
    gate = dict(sample["gate"], configs=[config])
    gate["metrics"] = [metric for metric in gate["metrics"] if metric in ("recall@5", "evidence_recall@5", "mrr")]
    params["gate"] = gate
    return params


def _check(target: Path, corpus: Path | None, cases: Path | None, force: bool) -> None:
    """Every reason not to start, found before anything is written."""
    problems = []
    if target.exists() and not target.is_dir():
        problems.append(Problem(str(target), "is a file, not a folder", "give a folder for the new project"))
    elif target.is_dir() and any(target.iterdir()) and not force:
        problems.append(Problem(str(target), "the folder is not empty", "choose a new folder, or pass --force"))
    if not (SOURCE / "dvc.yaml").is_file():
        problems.append(
            Problem(str(SOURCE), "no dvc.yaml beside the installed package", "install ragvet from its repository")
        )
    if corpus is not None and not corpus.exists():
        problems.append(Problem(str(corpus), "--corpus not found", "give a folder of documents or a corpus.jsonl"))
    if cases is not None and (not cases.is_file() or cases.suffix.lower() not in CASE_SUFFIXES):
        problems.append(Problem(str(cases), "--cases is not a .yaml, .yml or .jsonl file", "give the cases file"))
    raise_if(problems)


def _copy(source: Path, target: Path) -> None:
    """Copy a file or a folder (without Python caches) to ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy2(source, target)


def _write_params(target: Path) -> None:
    import yaml  # not for `ragvet --help`

    header = "# A first configuration: one chunking, one BM25 retriever, gated. Add more as you compare.\n"
    params = first_params(read_params(SOURCE / "params.yaml"))
    (target / "params.yaml").write_text(header + yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    (target / "abstention.yaml").write_text(
        "# Thresholds written by `ragvet tune-abstain`; none yet.\n{}\n", encoding="utf-8"
    )


def _run(target: Path, *command: str) -> None:
    """Run git or DVC in the new project, stopping with its own message on failure."""
    done = subprocess.run(command, cwd=target, capture_output=True, text=True)
    if done.returncode != 0:
        what = f"`{' '.join(command)}` failed: {done.stderr.strip()}"
        raise_if([Problem(str(target), what, "fix what it says, then run ragvet init again with --force")])


def create_project(target: Path, corpus: Path | None = None, cases: Path | None = None, force: bool = False) -> str:
    """Make ``target`` a git + DVC project running this pipeline; return the next steps."""
    _check(target, corpus, cases, force)
    target.mkdir(parents=True, exist_ok=True)
    for name in PIPELINE_FILES:
        _copy(SOURCE / name, target / name)
    _copy(SOURCE / "stages", target / "stages")
    for folder in KEPT_FOLDERS:
        (target / folder).mkdir(parents=True, exist_ok=True)
        (target / folder / ".gitkeep").touch()
    _write_params(target)
    if corpus is not None:
        _copy(corpus, target / "data/corpus" / ("" if corpus.is_dir() else corpus.name))
    if cases is not None:
        _copy(cases, target / "data/cases" / f"cases{cases.suffix.lower()}")
    _run(target, "git", "init", "-q")
    if not (target / ".dvc").exists():  # never `dvc init -f`: it would drop an existing cache and config
        _run(target, sys.executable, "-m", "dvc", "init", "-q")
    _run(target, sys.executable, "-m", "dvc", "config", "core.analytics", "false")
    _copy(SOURCE / ".dvc/plots", target / ".dvc/plots")  # after `dvc init`, which refuses an existing .dvc
    return NEXT_STEPS.format(target=target)
