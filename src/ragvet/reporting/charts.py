"""SVG charts for the HTML report, drawn with matplotlib.

The HTML report must be self-contained (no script, no network fetch) and
byte-identical across runs, so the charts are inline SVG made deterministic:
a fixed ``svg.hashsalt`` for element ids, no ``Date`` metadata, and text kept as
text (``svg.fonttype: none``) so no font outlines depend on the machine's fonts.
Labels are user text (config names, slice values): mathtext is off, so a ``$`` is
drawn as itself and never parsed, and each label is one short visible line
(:func:`chart_label`).
matplotlib is imported only here, when an HTML report is asked for.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

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


def _colours(names: Sequence[str]) -> dict[str, tuple]:
    from matplotlib import colormaps  # deferred: the HTML report's charts only

    palette = colormaps["tab10"]
    return {name: palette(i % 10) for i, name in enumerate(sorted(names))}


def at_k_chart(current: Sequence[dict], baseline: Sequence[dict]) -> str:
    """recall@k and evidence_recall@k against k, one line per configuration;
    the baseline (when given) dashed in the same colour. Rows as ``plot_rows``."""
    import matplotlib  # deferred: the HTML report's charts only
    from matplotlib.figure import Figure  # deferred: the HTML report's charts only

    names = sorted({row["config"] for row in current})
    colours = _colours(names)
    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(9, 3.6))
        axes = figure.subplots(1, 2, sharey=True)
        for ax, field in zip(axes, ("recall", "evidence_recall")):
            for rows, style, legend in ((baseline, "--", False), (current, "-", True)):
                for name in names:
                    points = [(r["k"], r[field]) for r in rows if r["config"] == name and r[field] is not None]
                    if points:
                        ks, values = zip(*points)
                        ax.plot(
                            ks,
                            values,
                            style,
                            marker="o",
                            ms=3,
                            color=colours[name],
                            label=chart_label(name) if legend else None,
                        )
            ax.set_title(f"{field}@k (eval split)")
            ax.set_xlabel("k")
            ax.set_ylim(0, 1.02)
        axes[0].set_ylabel("mean over cases")
        axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        return _svg(figure)


def budget_chart(current: Sequence[dict], baseline: Sequence[dict]) -> str:
    """Evidence recall against the context budget: a line per configuration over its
    budgets, its baseline dashed with hollow markers. Rows as ``budget_rows``."""
    import matplotlib  # deferred: the HTML report's charts only
    from matplotlib.figure import Figure  # deferred: the HTML report's charts only

    names = sorted({row["config"] for row in current})
    colours = _colours(names)
    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(6.5, 4))
        ax = figure.subplots()
        for rows, style in ((baseline, {"linestyle": "--", "markerfacecolor": "none"}), (current, {})):
            for name in names:
                points = [(r["budget"], r["evidence_recall"]) for r in rows if r["config"] == name]
                points = sorted(p for p in points if None not in p)
                if points:
                    label = None if rows is baseline else chart_label(name)
                    ax.plot(*zip(*points), marker="o", color=colours[name], label=label, **style)
        unit = current[0]["unit"] if current else ""
        ax.set_xlabel(chart_label(f"context budget ({unit})"))
        ax.set_ylabel("evidence recall")
        ax.set_ylim(0, 1.02)
        ax.set_title("Evidence recall against the context budget (dashed: baseline)")
        ax.legend(fontsize=7, loc="lower right")
        return _svg(figure)


def slice_chart(current: Sequence[dict], baseline: Sequence[dict], configs: Sequence[str]) -> str:
    """evidence_recall@k per slice for ``configs``: a bar per (slice, config), the
    baseline as a black tick. Rows as ``slice_rows``."""
    import matplotlib  # deferred: the HTML report's charts only
    from matplotlib.figure import Figure  # deferred: the HTML report's charts only

    configs = sorted(configs)
    colours = _colours(configs)
    slices = sorted({row["slice"] for row in current if row["config"] in configs})
    value = {(r["config"], r["slice"]): r["evidence_recall"] for r in current}
    old = {(r["config"], r["slice"]): r["evidence_recall"] for r in baseline}
    height = 0.8 / max(1, len(configs))
    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(7, 0.35 * max(1, len(slices)) * max(1, len(configs)) + 1))
        ax = figure.subplots()
        for j, name in enumerate(configs):
            ys = [i + j * height for i in range(len(slices))]
            ax.barh(
                ys,
                [value.get((name, s)) or 0.0 for s in slices],
                height=height,
                color=colours[name],
                label=chart_label(name),
            )
            ticks = [(y, old[(name, s)]) for y, s in zip(ys, slices) if old.get((name, s)) is not None]
            if ticks:
                ax.scatter([t[1] for t in ticks], [t[0] for t in ticks], marker="|", s=120, color="black")
        cases = {r["slice"]: r.get("cases") for r in current if r["config"] == configs[0]} if configs else {}
        labels = [chart_label(s) + (f" (n={cases[s]})" if cases.get(s) is not None else "") for s in slices]
        ax.set_yticks([i + 0.4 - height / 2 for i in range(len(slices))], labels)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.02)
        ax.set_xlabel("evidence_recall (eval split; black tick: baseline)")
        ax.legend(fontsize=7, loc="lower right")
        return _svg(figure)
