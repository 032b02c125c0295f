"""ragvet as a team installs it: the wheel, a fresh venv outside any checkout, a project made
by `ragvet init` that holds no ragvet code, the pin that names the release its stages run,
and `ragvet upgrade` from a project made by the previous release (0.1.0)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import yaml
from builders import beir_source
from repos import DATA, ROOT, init_repo, sh
from typer.testing import CliRunner

from ragvet.cli import app
from ragvet.pinning import installed_version, pin_problems, repinned
from ragvet.project import plot_templates, template_text
from ragvet.storage.placement import cache_flags_on
from ragvet.upgrade import upgraded_params, upgraded_pipeline

VERSION = installed_version()
RELEASE_0_1_0 = DATA / "release-0.1.0"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel `python -m build` makes, from a copy of what the distribution is built of."""
    source = tmp_path_factory.mktemp("source")
    shutil.copy2(ROOT / "pyproject.toml", source)
    shutil.copy2(ROOT / "README.md", source)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    sh(source, sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", "dist")
    [built] = (source / "dist").glob("ragvet-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory) -> Path:
    """A fresh venv outside the repository with the wheel installed. Its dependencies come
    from this environment's site-packages through a path line, which (unlike this
    environment's own .pth files) does not bring the editable ragvet along."""
    folder = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    libraries = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "dependencies.pth").write_text("".join(f"{path}\n" for path in sorted(libraries)))
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    return folder


def team_env(venv: Path) -> dict[str, str]:
    """The environment of a team's shell: the fresh venv's bin first, nothing of this checkout."""
    ours = str(Path(sys.executable).parent)
    path = [str(venv / "bin"), *(entry for entry in os.environ["PATH"].split(os.pathsep) if entry != ours)]
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PATH": os.pathsep.join(path), "DVC_NO_ANALYTICS": "1"}


def run(venv: Path, cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=cwd, env=team_env(venv), capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def test_the_wheel_holds_one_package_with_the_project_template_and_passes_twine_check(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"ragvet", f"ragvet-{VERSION}.dist-info"}
    template = {name.removeprefix("ragvet/template/") for name in names if name.startswith("ragvet/template/")}
    assert template == {
        "dvc.yaml", "params.yaml", "abstention.yaml", "gitignore", "answers-README.md", "plugins/__init__.py",
        "plots/ragvet_bars.json", "plots/ragvet_lines.json", "plots/ragvet_points.json",
    }  # fmt: skip
    entry_points = zipfile.ZipFile(wheel).read(f"ragvet-{VERSION}.dist-info/entry_points.txt").decode()
    assert "ragvet = ragvet.cli:main" in entry_points
    checked = sh(wheel.parent, sys.executable, "-m", "twine", "check", "--strict", wheel.name)
    assert "PASSED" in checked.stdout


def test_pip_show_lists_one_top_level_package_and_the_command_runs_it(venv, tmp_path):
    shown = run(venv, tmp_path, "python", "-m", "pip", "show", "-f", "ragvet").stdout
    files = [line.strip() for line in shown.split("Files:", 1)[1].splitlines() if line.strip()]
    installed = {path.split("/")[0] for path in files if not path.startswith("..")}
    assert installed == {"ragvet", f"ragvet-{VERSION}.dist-info"}
    assert [path for path in files if path.startswith("..")] == ["../../../bin/ragvet"]
    where = run(venv, tmp_path, "python", "-c", "import ragvet; print(ragvet.__file__)").stdout.strip()
    assert (
        Path(where).is_relative_to(venv) and run(venv, tmp_path, "ragvet", "--version").stdout == f"ragvet {VERSION}\n"
    )


def test_a_team_goes_from_the_wheel_to_a_passing_gate_with_no_ragvet_code_in_its_project(venv, tmp_path):
    """The README's team path, on a BEIR folder, outside any checkout."""
    project = tmp_path / "my-eval"
    assert "requirements.txt" in run(venv, tmp_path, "ragvet", "init", str(project)).stdout
    assert (project / "requirements.txt").read_text().splitlines()[-1] == f"ragvet=={VERSION}"
    into = ["--out-corpus", "data/corpus", "--out-cases", "data/cases/cases.yaml"]
    run(venv, project, "ragvet", "import", *beir_source(tmp_path), *into)
    run(venv, project, "git", "config", "user.email", "test@example.com")
    run(venv, project, "git", "config", "user.name", "test")
    run(venv, project, "python", "-m", "dvc", "repro", "report")
    assert "wrote" in run(venv, project, "ragvet", "baseline", "accept").stdout
    assert "gate: PASSED" in run(venv, project, "python", "-m", "dvc", "repro").stdout
    run(venv, project, "git", "add", "-A")
    run(venv, project, "git", "commit", "-qm", "First ragvet baseline")
    assert run(venv, project, "git", "status", "--porcelain").stdout == ""
    code = [path.relative_to(project).as_posix() for path in project.rglob("*.py") if ".git" not in path.parts]
    assert code == ["plugins/__init__.py"]
    assert (project / "dvc.yaml").read_text() == template_text("dvc.yaml")

    # Another release pinned than installed: the first stage stops with the fix, and writes nothing.
    (project / "requirements.txt").write_text("ragvet==0.1.0\n")
    done = run(venv, project, "python", "-m", "dvc", "repro", check=False)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert f"requirements.txt:1: the project pins ragvet 0.1.0, but ragvet {VERSION} is installed" in output
    assert "pip install -r requirements.txt" in output and "Traceback" not in output
    run(venv, project, "git", "checkout", "requirements.txt")
    assert run(venv, project, "git", "status", "--porcelain").stdout == ""


def release_0_1_0_project(folder: Path) -> Path:
    """A project as `ragvet init` 0.1.0 left it, with data imported and committed. Its copy of
    ragvet's source is stood in for by today's (the upgrade removes it unread)."""
    for source in RELEASE_0_1_0.rglob("*"):
        relative = source.relative_to(RELEASE_0_1_0).as_posix()
        if source.is_file() and relative != "README.md":
            target = folder / (".gitignore" if relative == "gitignore" else relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    shutil.copytree(ROOT / "src" / "ragvet", folder / "stages", ignore=shutil.ignore_patterns("__pycache__"))
    for folder_name in ("data/external", "metrics/baseline"):
        (folder / folder_name).mkdir(parents=True)
        (folder / folder_name / ".gitkeep").touch()
    init_repo(folder)
    for name, text in plot_templates().items():
        (folder / ".dvc" / "plots" / name).parent.mkdir(exist_ok=True)
        (folder / ".dvc" / "plots" / name).write_text(text)
    into = ["--out-corpus", str(folder / "data/corpus"), "--out-cases", str(folder / "data/cases/cases.yaml")]
    sh(folder, sys.executable, "-m", "ragvet.cli", "import", *beir_source(folder.parent), *into)
    sh(folder, "git", "add", "-A")
    sh(folder, "git", "commit", "-qm", "a project of ragvet 0.1.0")
    return folder


def test_upgrade_brings_a_release_0_1_0_project_to_the_installed_release_and_its_pipeline_runs(tmp_path):
    project = release_0_1_0_project(tmp_path / "old")
    params_before = (project / "params.yaml").read_text()
    (project / "notes.txt").write_text("mine\n")
    refused = sh(project, sys.executable, "-m", "ragvet.cli", "upgrade", check=False)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"{project}: the work tree has uncommitted changes (notes.txt)" in refused.stdout + refused.stderr
    assert (project / "stages" / "cli.py").is_file() and not (project / "requirements.txt").exists()
    (project / "notes.txt").unlink()
    # 0.1.0 committed the slice tables, which the pipeline now keeps in the DVC cache: DVC
    # refuses an output git tracks, so the upgrade must untrack it for the pipeline to run.
    (project / "metrics" / "slices").mkdir()
    (project / "metrics" / "slices" / "sentences-600-bm25.json").write_text("{}\n")
    sh(project, "git", "add", "-A")
    sh(project, "git", "commit", "-qm", "the slices of a 0.1.0 run")

    done = sh(project, sys.executable, "-m", "ragvet.cli", "upgrade", "--no-repro")
    changes = done.stdout.splitlines()
    untracked = "git: stopped tracking metrics/slices/sentences-600-bm25.json (the DVC cache keeps it now)"
    assert changes[-1] == untracked
    assert sh(project, "git", "ls-files", "metrics/slices").stdout == ""
    assert changes[0].startswith("stages/: removed (") and changes[1] == f"requirements.txt: pinned ragvet=={VERSION}"
    added = ["dvc.yaml: added stage settings", "dvc.yaml: added stage verdict"]
    assert [line for line in changes if line.startswith("dvc.yaml")] == added + [
        f"dvc.yaml: changed stage {stage}"
        for stage in ("validate", "chunk", "split", "retrieve", "evaluate", "report", "gate")
    ] + ["dvc.yaml: changed the plots"]  # evidence_rank_moves, which 0.1.0 did not draw
    assert not (project / "stages").exists()
    assert (project / "requirements.txt").read_text().splitlines()[-1] == f"ragvet=={VERSION}"
    assert (project / "dvc.yaml").read_text() == template_text("dvc.yaml")
    assert (project / "params.yaml").read_text() == params_before  # 0.1.0 wrote every section 0.2.0 reads

    sh(project, "dvc", "repro", "report")
    assert "sentences-600-bm25" in (project / "metrics" / "report.md").read_text()
    sh(project, "git", "add", "-A")
    sh(project, "git", "commit", "-qm", "ragvet upgrade")
    again = sh(project, sys.executable, "-m", "ragvet.cli", "upgrade", "--no-repro").stdout
    assert again == f"the project is up to date with ragvet {VERSION}\n"


def test_upgrade_adds_a_missing_section_and_key_with_their_defaults_keeping_the_users_comments():
    current = "# my knobs\nbudget:\n  unit: chars   # counted in characters\n  values: [100]\nks: [1, 5]\n"
    text, changes = upgraded_params(
        current, template_text("params.yaml"), ["budget.unit", "budget.tokenizer", "judged"]
    )
    assert changes == [
        "params.yaml: added budget.tokenizer: chars",
        "params.yaml: added section judged with its defaults",
    ]
    assert text.startswith("# my knobs\nbudget:\n  unit: chars   # counted in characters\n  values: [100]\n")
    assert yaml.safe_load(text) == {
        "budget": {"unit": "chars", "values": [100], "tokenizer": "chars"},
        "ks": [1, 5],
        "judged": {"metric": "judged@10", "max_drop": 0.10},
    }


def test_upgrade_keeps_a_stage_and_vars_of_the_users_own():
    template = template_text("dvc.yaml")
    mine = "vars:\n  - extra.yaml\nstages:\n  export:\n    cmd: ragvet export run --config x  # mine\n"
    text, changes = upgraded_pipeline(mine, template)
    merged = yaml.safe_load(text)
    assert list(merged["stages"]) == [*yaml.safe_load(template)["stages"], "export"]
    assert merged["vars"] == ["extra.yaml"] and "# mine" in text and "# The stage graph" in text
    assert changes[-2:] == ["dvc.yaml: kept your stage export", "dvc.yaml: changed the plots"]
    assert changes[0] == "dvc.yaml: added stage validate"


def test_upgrade_keeps_the_per_case_tables_in_dvc_where_migrate_storage_put_them():
    template = template_text("dvc.yaml")
    migrated, flipped = cache_flags_on(template)
    assert flipped == ["metrics/cases/${key}.parquet"]
    assert upgraded_pipeline(migrated, template, tables_in_dvc=True) == (migrated, [])
    assert upgraded_pipeline(migrated, template)[1] == ["dvc.yaml: changed stage evaluate"]


@pytest.mark.parametrize(
    ("pin", "problem"),
    [
        (None, None),
        ("pandas==2.2\n", None),
        (f"ragvet=={VERSION}\n", None),
        (f"-r base.txt\nragvet[dense] == {VERSION}  # ours\n", None),
        ("ragvet==0.1.0\n", f"requirements.txt:1: the project pins ragvet 0.1.0, but ragvet {VERSION} is installed"),
        ("x\nragvet>=0.1\n", "requirements.txt:2: ragvet is required as 'ragvet>=0.1', not pinned to one version"),
    ],
)
def test_a_stage_runs_only_under_the_pinned_release(tmp_path, monkeypatch, pin, problem):
    monkeypatch.chdir(tmp_path)
    if pin is not None:
        (tmp_path / "requirements.txt").write_text(pin)
    found = [item.render() for item in pin_problems()]
    assert found == [] if problem is None else (len(found) == 1 and found[0].startswith(problem)), found


def test_a_stage_under_another_release_exits_2_with_the_fix_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "requirements.txt").write_text("ragvet==0.1.0\n")
    result = CliRunner().invoke(app, ["chunk", "sentences-600", "--corpus", "corpus.jsonl", "--out", "chunks.jsonl"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert (
        "`pip install -r requirements.txt`" in result.output and f"`ragvet upgrade` to pin {VERSION}" in result.output
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["requirements.txt"]


def test_repinning_replaces_only_the_ragvet_line_and_keeps_its_comment():
    text = "-r base.txt\nragvet[dense]==0.1.0   # the pipeline\nnumpy\n"
    assert repinned(text, "ragvet[dense]==0.2.0") == "-r base.txt\nragvet[dense]==0.2.0   # the pipeline\nnumpy\n"


def test_the_repository_keeps_the_templates_plot_files_ignore_patterns_and_knobs():
    """The repository is a ragvet project too: what it shares with the template is the template's."""
    assert {path.name: path.read_text() for path in sorted((ROOT / ".dvc/plots").iterdir())} == plot_templates()
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert [line for line in template_text("gitignore").splitlines() if line not in ignored] == []
    sample, first = yaml.safe_load((ROOT / "params.yaml").read_text()), yaml.safe_load(template_text("params.yaml"))
    assert {key: sample[key] for key in ("depth", "ks", "evidence", "judged")} == {
        key: first[key] for key in ("depth", "ks", "evidence", "judged")
    }
    assert {k: v for k, v in sample["gate"].items() if k not in ("configs", "metrics")} == {
        k: v for k, v in first["gate"].items() if k not in ("configs", "metrics")
    }
