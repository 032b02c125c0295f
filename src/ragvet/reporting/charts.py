"""SVG charts for the HTML report, drawn with matplotlib.

The HTML report must be self-contained (no network fetch; its one script is the
case explorer's) and byte-identical across runs, so the charts are inline SVG made deterministic:
a fixed ``svg.hashsalt`` for element ids, no ``Date`` metadata, and text kept as
text (``svg.fonttype: none``) so no font outlines depend on the machine's fonts.
Labels are user text (config names, slice values): mathtext is off, so a ``$`` is
drawn as itself and never parsed, and each label is one short visible line
(:func:`chart_label`).
matplotlib is imported only here, when an HTML report is asked for.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

from ragvet.gating.baselines import compared_columns
from ragvet.gating.compare import Side, side_batches
from ragvet.measures.summary import Summaries
from ragvet.reporting.plots import budget_rows, plot_rows, slice_rows
from ragvet.reporting.summaries import summary_k
from ragvet.settings import Budget
from ragvet.storage.results import read_results
from ragvet.text.escaping import chart_label

_RC = {
    "svg.hashsalt": "ragvet",
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
}


def _svg(figure) -> str:
    """The figure as an ``<svg>`` element, without the XML prolog and DOCTYPE (which
    names an external DTD) so it can sit inline in HTML."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


# The Okabe-Ito palette: 8 colours told apart with the common colour-vision deficiencies.
# A chart's panel draws at most this many series, each in its own colour, so no two share one.
PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000")
MAX_SERIES = len(PALETTE)

# recall@k and evidence_recall@k in a configuration's panel: current solid, baseline dashed in a lighter pair.
_AT_K_SERIES = (
    ("recall", "current", "-", "#0072B2"),
    ("recall", "baseline", "--", "#56B4E9"),
    ("evidence_recall", "current", "-", "#D55E00"),
    ("evidence_recall", "baseline", "--", "#E69F00"),
)


def series_id(chart: str, panel: int, series: int, part: int = 0) -> str:
    """The SVG id of one drawn series (``part``: its bar, for a bar series): a page's
    test can count a panel's series and read their colours from the DOM."""
    return f"series-{chart}-{panel}-{series}-{part}"


def _ordered(names: Sequence[str], first: Sequence[str]) -> list[str]:
    """``names`` with the gated ones (``first``) leading, each part sorted: the reviewer's panels first."""
    return sorted(n for n in names if n in first) + sorted(n for n in names if n not in first)


def _groups(names: Sequence[str], size: int) -> list[list[str]]:
    """``names`` in runs of at most ``size``: one panel each, so no panel repeats a colour."""
    return [list(names[i : i + size]) for i in range(0, len(names), size)] or [[]]


def at_k_chart(current: Sequence[dict], baseline: Sequence[dict], gated: Sequence[str] = ()) -> str:
    """Small multiples: a panel per configuration (the gated ones first) with its
    recall@k and evidence_recall@k against k, the baseline dashed in a lighter colour
    of the same hue: four series per panel, four colours. Rows as ``plot_rows``."""
    import matplotlib  # deferred: the HTML report's charts only
    from matplotlib.figure import Figure  # deferred: the HTML report's charts only

    names = _ordered({row["config"] for row in current}, gated)
    columns = min(4, max(1, len(names)))
    rows_of_panels = max(1, -(-len(names) // columns))
    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(2.6 * columns + 1.6, 2.3 * rows_of_panels + 0.4))
        axes = figure.subplots(rows_of_panels, columns, sharex=True, sharey=True, squeeze=False).ravel()
        for panel, (ax, name) in enumerate(zip(axes, names)):
            for series, (field, rev, style, colour) in enumerate(_AT_K_SERIES):
                rows = current if rev == "current" else baseline
                points = [(r["k"], r[field]) for r in rows if r["config"] == name and r[field] is not None]
                if points:
                    ks, values = zip(*points)
                    label = f"{field}@k ({rev})" if panel == 0 else None
                    ax.plot(ks, values, style, marker="o", ms=3, color=colour, label=label)
                    ax.lines[-1].set_gid(series_id("atk", panel, series))
            ax.set_title(chart_label(name) + (" (gated)" if name in gated else ""), fontsize=8)
            ax.set_ylim(0, 1.02)
        for ax in axes[len(names) :]:
            ax.set_visible(False)
        for ax in axes[::columns]:
            ax.set_ylabel("mean over cases")
        for ax in axes[-columns:]:
            ax.set_xlabel("k")
        figure.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 0.95))
        return _svg(figure)


def budget_chart(current: Sequence[dict], baseline: Sequence[dict], gated: Sequence[str] = ()) -> str:
    """Evidence recall against the context budget: a line per configuration over its
    budgets, the current run and the baseline side by side in two panels, with the same
    colour per configuration; beyond :data:`MAX_SERIES` configurations, another row of
    panels. Rows as ``budget_rows``."""
    import matplotlib  # deferred: the HTML report's charts only
    from matplotlib.figure import Figure  # deferred: the HTML report's charts only

    groups = _groups(_ordered({row["config"] for row in current}, gated), MAX_SERIES)
    unit = current[0]["unit"] if current else ""
    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(9, 3.6 * len(groups)))
        axes = figure.subplots(len(groups), 2, sharey=True, squeeze=False)
        for row_of_panels, names in zip(axes, groups):
            for ax, rows, rev in zip(row_of_panels, (current, baseline), ("current", "baseline")):
                panel = figure.axes.index(ax)
                for series, name in enumerate(names):
                    points = [(r["budget"], r["evidence_recall"]) for r in rows if r["config"] == name]
                    points = sorted(p for p in points if None not in p)
                    if points:
                        ax.plot(*zip(*points), marker="o", ms=3, color=PALETTE[series], label=chart_label(name))
                        ax.lines[-1].set_gid(series_id("budget", panel, series))
                ax.set_xlabel(chart_label(f"context budget ({unit})"))
                ax.set_ylim(0, 1.02)
                ax.set_title(f"Evidence recall against the context budget ({rev})", fontsize=8)
            row_of_panels[0].set_ylabel("evidence recall")
            handles, labels = row_of_panels[0].get_legend_handles_labels()
            if handles:  # one legend for the pair: a configuration's colour is the same in both
                row_of_panels[1].legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        return _svg(figure)


def slice_chart(current: Sequence[dict], baseline: Sequence[dict], configs: Sequence[str]) -> str:
    """evidence_recall@k per slice for ``configs``: a bar per (slice, config), the
    baseline as a black tick; beyond :data:`MAX_SERIES` - 1 configurations (black is
    the ticks'), another panel. Rows as ``slice_rows``."""
    import matplotlib  # deferred: the HTML report's charts only
    from matplotlib.figure import Figure  # deferred: the HTML report's charts only

    configs = sorted(configs)
    groups = _groups(configs, MAX_SERIES - 1)
    slices = sorted({row["slice"] for row in current if row["config"] in configs})
    value = {(r["config"], r["slice"]): r["evidence_recall"] for r in current}
    old = {(r["config"], r["slice"]): r["evidence_recall"] for r in baseline}
    cases = {r["slice"]: r.get("cases") for r in current if r["config"] == configs[0]} if configs else {}
    labels = [chart_label(s) + (f" (n={cases[s]})" if cases.get(s) is not None else "") for s in slices]
    tall = [0.35 * max(1, len(slices)) * max(1, len(names)) + 1 for names in groups]
    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(7, sum(tall)))
        axes = figure.subplots(len(groups), 1, squeeze=False, gridspec_kw={"height_ratios": tall}).ravel()
        for panel, (ax, names) in enumerate(zip(axes, groups)):
            height, ticks = 0.8 / max(1, len(names)), []
            for j, name in enumerate(names):
                ys = [i + j * height for i in range(len(slices))]
                bars = ax.barh(
                    ys,
                    [value.get((name, s)) or 0.0 for s in slices],
                    height=height,
                    color=PALETTE[j],
                    label=chart_label(name),
                )
                for part, bar in enumerate(bars):
                    bar.set_gid(series_id("slice", panel, j, part))
                ticks += [(y, old[(name, s)]) for y, s in zip(ys, slices) if old.get((name, s)) is not None]
            if ticks:  # one series: every configuration's baseline, in the black no bar has
                ax.scatter([t[1] for t in ticks], [t[0] for t in ticks], marker="|", s=120, color=PALETTE[-1])
                ax.collections[-1].set_gid(series_id("slice", panel, MAX_SERIES - 1))
            ax.set_yticks([i + 0.4 - height / 2 for i in range(len(slices))], labels)
            ax.invert_yaxis()
            ax.set_xlim(0, 1.02)
            ax.set_xlabel("evidence_recall (eval split; black tick: baseline)")
            ax.legend(fontsize=7, loc="lower right")
        return _svg(figure)


def _slices(table: Side, slice_keys: Sequence[str], k: int) -> dict:
    """:func:`ragvet.measures.summary.slice_table` at ``k`` of a per-case table's cases and
    metrics (:func:`ragvet.gating.baselines.compared_columns`), a batch of cases at a time
    when it is a file: the sums are exact, so the figures are those of the whole table."""
    wanted = read_results(table, rows=0, columns=compared_columns(None)).columns if isinstance(table, Path) else ()
    tally = Summaries([k], slice_keys=slice_keys)
    for (frame,) in side_batches([table], wanted):
        tally.add(frame)
    return tally.slice_table()


def report_figures(
    settings: dict, summaries: dict, base_summaries: dict, slices: dict, base_tables: Mapping[str, Side]
) -> list[tuple[str, str]]:
    """The HTML report's charts: recall against k, evidence recall against the budget,
    the gated configurations' slices, each beside its baseline (``base_tables``: the
    baselines' per-case tables, whose slices are tabled here)."""
    ks, k, budget = settings["ks"], summary_k(settings["ks"]), Budget.from_params(settings)
    base_slices = {name: _slices(table, settings["slices"], k) for name, table in base_tables.items()}
    gated = [c for c in settings["gate"]["configs"] if c in slices]
    return [
        (
            "recall@k and evidence_recall@k per configuration (dashed: baseline)",
            at_k_chart(plot_rows(summaries, ks), plot_rows(base_summaries, ks), gated),
        ),
        (
            "Evidence recall against the context budget",
            budget_chart(
                budget_rows(summaries, k, budget.values, budget.label),
                budget_rows(base_summaries, k, budget.values, budget.label),
                gated,
            ),
        ),
        (
            f"Per-slice evidence_recall@{k} of the gated configurations",
            slice_chart(slice_rows(slices, k), slice_rows(base_slices, k), gated),
        ),
    ]
