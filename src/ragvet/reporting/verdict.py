"""The gate's verdict as the report's first section: passed or failed, then every
reason it failed (or what passing covered).

It renders a verdict it is given and decides nothing: in the pipeline the verdict
stage decided it once and wrote it (:mod:`ragvet.gating.decision`), so the report
and the gate's exit code cannot disagree.
"""

from __future__ import annotations

from ragvet.gating.compare import family_text
from ragvet.gating.latency import latency_text
from ragvet.measures.registry import higher_is_better
from ragvet.text.escaping import md_code, md_prose
from ragvet.text.formatting import fmt, fmt_ci, fmt_p, slice_name


def _bad_move(metric: str) -> str:
    """The direction that fails: a drop, or a rise where lower is better (an unsupported-answer share)."""
    return "drop" if higher_is_better(metric) else "rise"


def verdict_section(verdict: dict, against: str | None) -> list[str]:
    """Pass or fail first, then every reason it failed (or what passing covered)."""
    passed = verdict["passed"]
    out = [f"## {'✅ Gate passed' if passed else '❌ Gate failed'}", ""]
    if not verdict["configs"]:
        return out + ["- No configuration is gated: list them under `gate.configs` in params.yaml.", ""]
    for cfg in verdict["configs"]:
        name = md_code(cfg["config"])
        confidence = f"{cfg.get('confidence', 0.95) * 100:g}%"
        if cfg.get("accepted"):
            out.append(f"- {name}: accepted: {md_prose(cfg['accepted'])}.")
        for reason in cfg["reasons"]:
            out.append(f"- {name}: no valid comparison: {md_prose(reason)}")
        for note in cfg.get("notes") or []:
            out.append(f"- {name}: {md_prose(note)}.")
        for skipped in cfg.get("skipped") or []:
            what = f"slices of {md_code(skipped['metric'])}" if skipped.get("slices") else md_code(skipped["metric"])
            out.append(f"- {name}: {what} not compared: {md_prose(skipped['reason'])}.")
        for m in cfg["metrics"]:
            if m["failed"]:
                out.append(
                    f"- {name}: {md_code(m['metric'])} {fmt(m['baseline'])} → {fmt(m['current'])} "
                    f"({fmt(m['delta'], True)}, {confidence} CI {fmt_ci(m)}, corrected p {fmt_p(m['p_corrected'])}), "
                    f"a {_bad_move(m['metric'])} of more than "
                    f"`max_drop` {fmt(cfg['max_drop'])}"
                )
        for s in cfg["slices"]:
            if s["failed"]:
                out.append(
                    f"- {name}: slice {md_code(slice_name(s))} ({s['cases']} cases) {md_code(s['metric'])} "
                    f"{fmt(s['baseline'])} → {fmt(s['current'])} ({fmt(s['delta'], True)}, {confidence} CI "
                    f"{fmt_ci(s)}, corrected p {fmt_p(s['p_corrected'])}), a {_bad_move(s['metric'])} of more than "
                    f"`slice_max_drop` {fmt(cfg['slice_max_drop'])}"
                )
        timed = cfg.get("latency") or {}
        if timed.get("failed") or timed.get("note"):  # a p95 that passed is left out: it varies run to run
            out.append(f"- {name}: {md_prose(latency_text(timed))}.")
        if cfg["passed"] and not cfg.get("accepted"):
            guarded = ", ".join(md_code(m["metric"]) for m in cfg["metrics"])
            out.append(
                f"- {name}: no guarded metric ({guarded}) moved the wrong way by more than {fmt(cfg['max_drop'])}, "
                f"and none of its {len(cfg['slices'])} slices by more than {fmt(cfg['slice_max_drop'])}."
            )
        if cfg["newly_missed"]:
            out.append(
                f"- {name}: {len(cfg['newly_missed'])} case(s) newly missed at `hit@{cfg['newly_missed_k']}` "
                "(listed below)."
            )
    source = (
        f"{md_code(against)} (its committed results)" if against else "the committed baseline (`metrics/baseline/`)"
    )
    family = family_text(verdict["configs"][0].get("family"))
    return out + ["", f"Compared with {source}, paired over the same eval-split cases. {family}".rstrip(), ""]
