"""Stage ``gate``: compare the gated configurations with the committed baseline
(or with any git revision's results) and exit non-zero when retrieval got worse."""

from __future__ import annotations

from pathlib import Path

import typer

from stages.errors import user_errors
from stages.files import read_json, read_jsonl, read_params, write_json


def read_baseline_dir(baseline: Path, config: str) -> tuple[dict | None, list[dict] | None]:
    """The committed baseline of one configuration, or (None, None) if there is none."""
    summary, cases = baseline / f"{config}.json", baseline / "cases" / f"{config}.jsonl"
    if not (summary.exists() and cases.exists()):
        return None, None
    return read_json(summary), read_jsonl(cases)


def baselines_for(configs: list[str], baseline: Path, against: str | None) -> dict[str, tuple]:
    """``{config: (summary, rows)}`` from a git revision's results or from the
    committed baseline folder; ``(None, None)`` where there is none."""
    if against:
        from stages.gating import read_results_at  # numpy loads with the gate, not for `ragvet --help`

        found = read_results_at(against, configs, Path.cwd())
        return {config: found[config] or (None, None) for config in configs}
    return {config: read_baseline_dir(baseline, config) for config in configs}


def current_rows(cases_dir: Path, config: str) -> list[dict] | None:
    path = cases_dir / f"{config}.jsonl"
    return read_jsonl(path) if path.exists() else None


def rebaselined(configs: list[str], baseline: Path, current: dict[str, list[dict] | None]) -> list[str]:
    """The configurations whose committed baseline holds exactly their current
    per-case results: this change ran ``ragvet baseline accept`` (or is back at
    the accepted state), so a comparison with another revision may accept its moves."""
    return [
        config
        for config in configs
        if current.get(config) is not None and read_baseline_dir(baseline, config)[1] == current[config]
    ]


@user_errors
def main(
    cases_dir: Path = typer.Option(Path("metrics/cases"), help="Folder of per-case JSONL, one per configuration."),
    split: Path = typer.Option(Path("data/split.json"), help="Frozen split JSON."),
    baseline: Path = typer.Option(Path("metrics/baseline"), help="Committed baseline folder."),
    out: Path | None = typer.Option(None, help="Verdict JSON to write."),
    against: str | None = typer.Option(None, help="Compare with this git revision's results instead."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Paired comparison per guarded metric and slice, with bootstrap intervals."""
    from stages.gating import gate_all, render_verdict  # numpy loads with the gate, not for `ragvet --help`

    settings = read_params(params)
    configs = settings["gate"]["configs"]
    current = {config: current_rows(cases_dir, config) for config in configs}
    verdict = gate_all(
        settings["gate"],
        settings["slices"],
        baselines_for(configs, baseline, against),
        current,
        read_json(split)["fingerprints"],
        against,
        rebaselined(configs, baseline, current),
    )
    if out is not None:
        write_json(out, verdict)
    typer.echo(render_verdict(verdict))
    if not verdict["passed"]:
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
