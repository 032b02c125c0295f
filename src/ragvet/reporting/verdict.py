"""The gate's verdict as the report's first line (passed or failed and what failed, in
plain text) and its details: every reason it failed, or what passing covered.

The first line is ASCII apart from user names, so it reads the same in any font: no
emoji or arrow a machine may lack draws as an empty box in the one line everyone reads.

It renders a verdict it is given and decides nothing: in the pipeline the verdict
stage decided it once and wrote it (:mod:`ragvet.gating.decision`), so the report
and the gate's exit code cannot disagree.
"""

from __future__ import annotations

from ragvet.gating.compare import family_text
from ragvet.gating.latency import latency_text
from ragvet.measures.registry import higher_is_better
from ragvet.reporting.markdown import joined
from ragvet.text.escaping import md_code, md_prose
from ragvet.text.formatting import fmt, fmt_ci, fmt_p, is_missing, slice_name

# How many failed metrics the first line names before "and N more": one line stays one line.
HEADLINE_METRICS = 3


def _bad_move(metric: str) -> str:
    """The direction that fails: a drop, or a rise where lower is better (an unsupported-answer share)."""
    return "drop" if higher_is_better(metric) else "rise"


def _plain(value: float | None) -> str:
    """A figure of the first line: :func:`fmt`, with ``n/a`` for no value (its dash is not ASCII)."""
    return "n/a" if is_missing(value) else fmt(value)


def _failed_config(cfg: dict) -> str:
    """What failed in one gated configuration, in one clause: its failed guarded metrics
    with their moves (the first :data:`HEADLINE_METRICS`), then its slices and latency."""
    name = md_code(cfg["config"])
    failed = [m for m in cfg["metrics"] if m["failed"]]
    slices = sum(1 for s in cfg["slices"] if s["failed"])
    parts = [f"{len(failed)} guarded metric{'s' * (len(failed) != 1)}"] if failed else []
    parts += [f"{slices} slice{'s' * (slices != 1)}"] if slices else []
    if parts:
        moved = "dropped" if all(higher_is_better(m["metric"]) for m in failed) else "moved the wrong way"
        moves = [f"{md_code(m['metric'])} {_plain(m['baseline'])} -> {_plain(m['current'])}" for m in failed]
        more = len(moves) - HEADLINE_METRICS
        shown = ", ".join(moves[:HEADLINE_METRICS]) + (f" and {more} more" if more > 0 else "")
        clause = f"{' and '.join(parts)} {moved} in {name}" + (f" ({shown})" if moves else "")
    else:
        clause = ""
    timed = cfg.get("latency") or {}
    extra = ["no valid comparison"] if cfg["reasons"] else []
    extra += ["p95 latency rose too far"] if timed.get("failed") else []
    if extra:
        clause = f"{clause}; " if clause else f"{name}: "
        clause += ", ".join(extra)
    return clause or f"{name} failed (see the details)"


def verdict_headline(verdict: dict) -> str:
    """The report's first line: ``Gate: PASSED`` or ``Gate: FAILED`` and, in one line,
    what failed (or what passing covered). Plain ASCII apart from user names."""
    configs = verdict["configs"]
    word = "PASSED" if verdict["passed"] else "FAILED"
    if not configs:
        return f"Gate: {word} - no configuration is gated"
    if not verdict["passed"]:
        return f"Gate: {word} - " + "; ".join(_failed_config(cfg) for cfg in configs if not cfg["passed"])
    accepted = [md_code(cfg["config"]) for cfg in configs if cfg.get("accepted")]
    within = [md_code(cfg["config"]) for cfg in configs if not cfg.get("accepted")]
    parts = [f"no guarded metric or slice moved beyond tolerance in {joined(within)}"] if within else []
    parts += [f"{joined(accepted)} accepted deliberately"] if accepted else []
    return f"Gate: {word} - " + "; ".join(parts)


def verdict_section(verdict: dict, against: str | None) -> list[str]:
    """The verdict's details, under the first line: every reason it failed (or what
    passing covered), and what it was compared with."""
    out: list[str] = []
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
            if m.get("unmeasured"):
                out.append(f"- {name}: {md_code(m['metric'])} not measured: {md_prose(m['unmeasured'])}")
            elif m["failed"]:
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
