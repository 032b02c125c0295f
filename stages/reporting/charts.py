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

from stages.reporting.escaping import chart_label

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
    from matplotlib import colormaps  # not for `ragvet --help`

    palette = colormaps["tab10"]
    return {name: palette(i % 10) for i, name in enumerate(sorted(names))}


def at_k_chart(current: Sequence[dict], baseline: Sequence[dict]) -> str:
    """recall@k and evidence_recall@k against k, one line per configuration;
    the baseline (when given) dashed in the same colour. Rows as ``plot_rows``."""
    import matplotlib  # not for `ragvet --help`
    from matplotlib.figure import Figure  # not for `ragvet --help`

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
    """evidence_recall@k against context_chars@k, one point per configuration, an
    arrow from its baseline point (hollow) when there is one. Rows as ``budget_rows``."""
    import matplotlib  # not for `ragvet --help`
    from matplotlib.figure import Figure  # not for `ragvet --help`

    names = sorted(row["config"] for row in current)
    colours = _colours(names)
    before = {row["config"]: row for row in baseline}
    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(6.5, 4))
        ax = figure.subplots()
        for row in current:
            name, x, y = row["config"], row["context_chars"], row["evidence_recall"]
            if x is None or y is None:
                continue
            old = before.get(name)
            if old and old["context_chars"] is not None and old["evidence_recall"] is not None:
                ax.scatter(
                    [old["context_chars"]], [old["evidence_recall"]], facecolors="none", edgecolors=[colours[name]]
                )
                ax.annotate(
                    "",
                    (x, y),
                    (old["context_chars"], old["evidence_recall"]),
                    arrowprops={"arrowstyle": "->", "color": colours[name]},
                )
            ax.scatter([x], [y], color=[colours[name]], label=chart_label(name))
            ax.annotate(chart_label(name), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        k = current[0]["k"] if current else ""
        ax.set_xlabel(f"context_chars@{k} (characters the generator reads)")
        ax.set_ylabel(f"evidence_recall@{k}")
        ax.set_title("Evidence recall against its context budget (hollow: baseline)")
        return _svg(figure)


def slice_chart(current: Sequence[dict], baseline: Sequence[dict], configs: Sequence[str]) -> str:
    """evidence_recall@k per slice for ``configs``: a bar per (slice, config), the
    baseline as a black tick. Rows as ``slice_rows``."""
    import matplotlib  # not for `ragvet --help`
    from matplotlib.figure import Figure  # not for `ragvet --help`

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
