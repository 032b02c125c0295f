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
    from stages.gating import compare_config, gate_verdict, read_baseline_at, render_verdict  # numpy: not for --help

    settings = read_params(params)
    gate = settings["gate"]
    current_fingerprints = read_json(split)["fingerprints"]
    results = []
    for config in gate["configs"]:
        if against:
            base_summary, base_rows = read_baseline_at(against, config, Path.cwd())
        else:
            base_summary, base_rows = read_baseline_dir(baseline, config)
        results.append(
            compare_config(
                config,
                base_rows,
                read_jsonl(cases_dir / f"{config}.jsonl"),
                base_summary["fingerprints"] if base_summary else None,
                current_fingerprints,
                gate,
                settings["slices"],
            )
        )
    verdict = gate_verdict(results)
    if out is not None:
        write_json(out, verdict)
    typer.echo(render_verdict(verdict))
    if not verdict["passed"]:
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
