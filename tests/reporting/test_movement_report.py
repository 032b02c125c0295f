"""The report's section on what moved on every case (ragvet.reporting.movement): figures as
the verdict holds them, user text escaped, and a configuration the verdict could not measure."""

from __future__ import annotations

from ragvet.reporting.movement import movement_section

SPREAD = {"mean": 0.75, "p10": 0.55, "p50": 0.75, "p90": 0.95}


def test_figures_slices_and_most_moved_with_user_text_escaped():
    figures = {"cases": 2, "topk_changed": 0.5, "overlap": SPREAD, "rbo": SPREAD}
    moved = {
        "k": 10,
        "p": 0.9,
        **figures,
        "slices": {"region": {"e|u": figures}},
        "most_moved": [{"case_id": "q`1 <b>", "overlap": 0.0, "rbo": 0.125}],
    }
    lines = movement_section(
        {"moved": {"cfg": moved, "old": {"unavailable": "no ranking: run `ragvet baseline accept`"}}}
    )
    text = "\n".join(lines)
    assert "- `cfg`: top 10 changed for 0.500 of 2 cases (RBO p = 0.900)" in text
    assert "| all |  | 2 | 0.500 | 0.750 | 0.550 | 0.750 | 0.950 | 0.750 | 0.550 | 0.750 | 0.950 |" in text
    assert "| `region` | `e\\|u` | 2 | 0.500 |" in text  # a pipe in a slice value cannot split the cell
    assert "Moved most: ``q`1 <b>`` (RBO 0.125, overlap 0.000)" in text  # a code span: no HTML, no break-out
    assert "- `old`: not measured: no ranking: run `ragvet baseline accept`" in text
    assert lines[0] == "<details>"


def test_no_section_without_measured_movement():
    assert movement_section({"configs": []}) == []
