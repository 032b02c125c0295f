"""A BEIR folder, a TREC collection and a SQuAD file, each imported into a clean project
made by `ragvet init`, run through `dvc repro`, given a baseline, then broken by a
harmful change that fails the gate. After `git add -A` and a
commit, a second run ends at the gate again, with no error from DVC or git: no sample
leftovers are read, and no cached output is tracked by git. And what `ragvet init` refuses:
a corpus holding the new project, replacing a project's files, half a project."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from builders import MINERALS, beir_source, invoke, squad_source, trec_source
from repos import sh

from ragvet import project as making


def test_init_refuses_a_non_empty_folder_and_a_bad_cases_file_writing_nothing(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "cases.csv").write_text("id,question\n")
    output = invoke("init", str(tmp_path), "--cases", str(tmp_path / "cases.csv"), code=2).output
    assert f"{tmp_path}: the folder is not empty" in output
    assert f"{tmp_path / 'cases.csv'}: --cases is not a .yaml, .yml or .jsonl file" in output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cases.csv", "notes.txt"]


def imported(tmp_path: Path, source) -> tuple[Path, Path]:
    """``source`` imported into a folder of its own: (corpus folder, cases file)."""
    tmp_path.mkdir()
    corpus, cases = tmp_path / "corpus", tmp_path / "cases.yaml"
    invoke("import", *source(tmp_path), "--out-corpus", str(corpus), "--out-cases", str(cases))
    return corpus, cases


def test_a_trec_collection_imports_as_its_beir_folder_does_but_for_the_topic_ids(tmp_path):
    """The same collection as TREC topics, qrels and docs gives the BEIR folder's corpus byte
    for byte, and its cases but for the ids (TREC's topic numbers, as strings): the flow
    below, run on the BEIR and SQuAD imports, would run on the same inputs. The ids go
    through validate in a project of `ragvet init` as they are."""
    beir_corpus, beir_cases = imported(tmp_path / "beir", beir_source)
    trec_corpus, trec_cases = imported(tmp_path / "trec", trec_source)
    assert sorted(p.name for p in trec_corpus.iterdir()) == ["corpus.jsonl"]
    assert (trec_corpus / "corpus.jsonl").read_bytes() == (beir_corpus / "corpus.jsonl").read_bytes()
    trec = yaml.safe_load(trec_cases.read_text())
    assert [case["id"] for case in trec] == [str(n) for n in range(len(MINERALS))]
    assert [{**case, "id": f"q{case['id']}"} for case in trec] == yaml.safe_load(beir_cases.read_text())

    project = tmp_path / "project"
    invoke("init", str(project))
    into = ["--out-corpus", str(project / "data/corpus"), "--out-cases", str(project / "data/cases/cases.yaml")]
    invoke("import", *trec_source(tmp_path / "trec"), *into)
    sh(project, "dvc", "repro", "validate")
    validated = (project / "data/validated/cases.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in validated] == [str(n) for n in range(len(MINERALS))]


def test_own_data_from_init_to_a_failing_gate_and_a_second_run(tmp_path):
    """SQuAD (span labels, ids with a slash, no qrels). A BEIR folder takes the same path
    from a wheel in a fresh venv (test_packaging); a TREC collection imports as its BEIR
    folder does (the test above)."""
    project = tmp_path / "project"
    steps = invoke("init", str(project)).output
    assert "dvc repro report" in steps and "ragvet baseline accept" in steps
    assert sorted(p.name for p in (project / "metrics" / "baseline").iterdir()) == [".gitkeep"]
    assert sorted(p.name for p in (project / "data" / "answers").iterdir()) == ["README.md"]
    assert yaml.safe_load((project / "abstention.yaml").read_text()) == {}
    invoke(
        "import", *squad_source(tmp_path),
        "--out-corpus", str(project / "data/corpus"), "--out-cases", str(project / "data/cases/cases.yaml"),
    )  # fmt: skip
    sh(project, "git", "config", "user.email", "test@example.com")
    sh(project, "git", "config", "user.name", "test")

    sh(project, "dvc", "repro", "report")
    params = ["--metrics-dir", str(project / "metrics"), "--params", str(project / "params.yaml")]
    assert "wrote" in invoke("baseline", "accept", *params).output
    assert "gate: PASSED" in sh(project, "dvc", "repro").stdout
    sh(project, "git", "add", "-A")
    sh(project, "git", "commit", "-qm", "first baseline")

    # Harmful: a new chunking (new cached outputs during a failing run) and case-sensitive BM25.
    settings = yaml.safe_load((project / "params.yaml").read_text())
    settings["chunking"]["fixed-40"] = {"strategy": "fixed", "unit": "chars", "window": 40, "overlap": 0}
    [config] = settings["configs"]
    settings["configs"][config]["chunking"] = "fixed-40"
    settings["retrievers"]["bm25"]["lowercase"] = False
    (project / "params.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    for attempt in ("first", "second"):
        done = sh(project, "dvc", "repro", check=False)
        output = done.stdout + done.stderr
        assert done.returncode != 0 and "gate: FAILED" in output, output
        assert "already tracked by SCM" not in output and "ERROR: failed to reproduce 'gate'" in output, output
        sh(project, "git", "add", "-A")
        sh(project, "git", "commit", "-qm", f"harmful change, {attempt} run", check=False)
    tracked = sh(project, "git", "ls-files").stdout.split()
    assert not [path for path in tracked if path.startswith(("data/chunks/", "data/runs/", "data/validated/"))]
    assert "data/cases/cases.yaml" in tracked and "data/corpus/corpus.jsonl" in tracked


def test_init_copies_the_given_corpus_and_cases_into_the_project(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "leave.md").write_text("You may carry up to five unused days.\n")
    (tmp_path / "mine.jsonl").write_text('{"id": "c1", "question": "carry?", "evidence": [{"doc": "leave"}]}\n')
    project = tmp_path / "project"
    invoke("init", str(project), "--corpus", str(tmp_path / "docs"), "--cases", str(tmp_path / "mine.jsonl"))
    assert (project / "data/corpus/leave.md").read_text() == "You may carry up to five unused days.\n"
    assert (project / "data/cases/cases.jsonl").read_text() == (tmp_path / "mine.jsonl").read_text()
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert list(params["configs"]) == params["gate"]["configs"] == ["sentences-600-bm25"]
    assert params["slices"] == [] and params["gate"]["metrics"] == ["recall@5", "evidence_recall@5", "mrr"]
    assert (project / ".dvc/plots/ragvet_lines.json").is_file() and (project / ".git").is_dir()


def test_optional_sections_left_out_then_added_rerun_only_what_reads_them(tmp_path):
    """A params.yaml without `budget` and `judged` runs (DVC never sees a missing declared
    key) with no budget metrics; adding budget values re-runs evaluate and not the chunking;
    a settings file older than the params is refused, not read."""
    project = tmp_path / "project"
    invoke("init", str(project))
    into = ["--out-corpus", str(project / "data/corpus"), "--out-cases", str(project / "data/cases/cases.yaml")]
    invoke("import", *squad_source(tmp_path), *into)
    params = yaml.safe_load((project / "params.yaml").read_text())
    del params["budget"], params["judged"]
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    sh(project, "dvc", "repro", "report")
    [config] = params["configs"]
    summary = json.loads((project / f"metrics/{config}.json").read_text())
    assert not [name for name in summary["eval"]["metrics"] if "budget" in name]
    assert json.loads((project / "data/settings/budget.json").read_text()) == {
        "budget": {"unit": "chars", "tokenizer": "chars", "values": []}
    }
    assert json.loads((project / "data/settings/judged.json").read_text()) == {
        "judged": {"metric": "judged@10", "max_drop": 0.1}
    }

    params["budget"] = {"values": [64]}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    evaluate = f"evaluate@{config}"
    stale = sh(project, "dvc", "repro", "-s", "-f", evaluate, check=False)
    assert stale.returncode != 0 and "data/settings/budget.json: out of date" in stale.stdout + stale.stderr
    ran = sh(project, "dvc", "repro", "report").stdout
    assert f"Running stage '{evaluate}'" in ran and "Running stage 'chunk@" not in ran, ran
    summary = json.loads((project / f"metrics/{config}.json").read_text())
    assert "evidence_recall_budget@64" in summary["eval"]["metrics"]


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder)."""
    return {p.relative_to(folder).as_posix(): None if p.is_dir() else p.read_bytes() for p in folder.rglob("*")}


def test_init_refuses_a_corpus_that_holds_the_new_project_writing_nothing(tmp_path, monkeypatch):
    """`ragvet init eval --corpus .` copied the project into its own corpus until Python gave up."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.md").write_text("You may carry up to five unused days.\n")
    monkeypatch.chdir(docs)
    for corpus in (".", str(docs)):
        result = invoke("init", "eval", "--corpus", corpus, code=None)
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert f"{corpus}: the corpus folder holds the new project (eval)" in result.stderr
        assert "give --corpus a folder outside eval" in result.stderr
        assert tree(docs) == {"leave.md": b"You may carry up to five unused days.\n"}


def test_init_force_never_replaces_a_projects_files(tmp_path):
    """--force writes into a non-empty folder; it replaced params.yaml, abstention.yaml,
    dvc.yaml and .gitignore of an existing project without a word."""
    project = tmp_path / "project"
    invoke("init", str(project))
    invoke("init", str(project), "--force")  # every file as init writes it: nothing to replace
    edited = {"params.yaml": "depth: 7\n", "abstention.yaml": "x: 1\n", "dvc.yaml": "stages: {}\n", ".gitignore": "a\n"}
    for name, text in edited.items():
        (project / name).write_text(text)
    before = tree(project)
    result = invoke("init", str(project), "--force", code=None)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert (
        f"{project}: ragvet init would replace these files, which differ from what it writes: "
        ".gitignore, abstention.yaml, dvc.yaml, params.yaml"
    ) in result.stderr
    assert "ragvet upgrade" in result.stderr
    assert tree(project) == before


@pytest.mark.parametrize("existing", [False, True])
def test_an_init_that_fails_at_dvc_init_leaves_the_folder_as_it_was(existing, tmp_path, monkeypatch):
    """A full disk stopped init at `dvc init`, leaving half a project that the next init
    refused as not empty: now init removes what it made, and runs again."""
    target = tmp_path / "project"
    if existing:
        target.mkdir()
        (target / "notes.txt").write_text("mine\n")
    before = tree(target) if existing else None
    real_run = subprocess.run

    def full_disk(command, *args, **kwargs):
        if list(command[-3:]) == ["dvc", "init", "-q"]:
            return subprocess.CompletedProcess(command, 1, "", "ERROR: [Errno 28] No space left on device")
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(making.subprocess, "run", full_disk)
    force = ["--force"] if existing else []
    result = invoke("init", str(target), *force, code=None)
    assert result.exit_code == 2 and "No space left on device" in result.stderr, result.output
    assert "nothing of the new project was kept" in result.stderr
    assert (tree(target) == before) if existing else not target.exists()
    monkeypatch.setattr(making.subprocess, "run", real_run)
    invoke("init", str(target), *force)
    assert (target / ".dvc" / "config").is_file() and (target / "params.yaml").is_file()
