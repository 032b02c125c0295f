"""``docs/metrics.md``, generated from the metric registry (``ragvet metrics-doc``).

The page is written from the registry, never by hand, and a test compares the two, so
the documentation cannot drift from what is computed.
"""

from __future__ import annotations

from ragvet.measures.answers import REVIEW_METRICS
from ragvet.measures.registry import METRICS, MOVEMENT
from ragvet.reporting.markdown import md_table
from ragvet.text.escaping import md_text

METRICS_DOC_INTRO = """# Metrics

Generated from the metric registry (`src/ragvet/measures/registry.py`) by
`ragvet metrics-doc > docs/metrics.md`; a test fails when this file and the
registry disagree, so edit the registry, not this page.

Each metric is computed per case; a summary is the macro mean over the cases
that have a value, printed beside its denominators. The retrieved list is
deduplicated first, keeping the first occurrence; `k <= 0` gives 0, and a k
beyond the retrieved depth counts the missing ranks as non-relevant, as
trec_eval does. A case's *relevant chunks* are the chunks that overlap any of
its evidence spans by at least one character (every chunk of the doc, for
`{doc}` evidence). A span's coverage counts its non-whitespace characters only, so
the whitespace that chunk boundaries trim never leaves a span short of being
covered. Chunk-level figures cannot be compared across chunkings,
because their denominator changes with the chunking: when a gated configuration's
chunking differs from its baseline's, the gate compares only the guarded metrics
marked comparable below and names the others as skipped
([pull-requests.md](pull-requests.md#a-chunking-change)). The reference definitions
(`src/ragvet/measures/reference.py`) give each formula and its empty-case value in
their docstrings; the engine (`src/ragvet/measures/engine.py`) is tested against them.

The budget metrics (`budget:` in params.yaml) spend `B` units, characters or the
tokens of a local tokenizer (`budget.unit`, `budget.tokenizer`), at each of
`budget.values`. Chunks are paid for in rank order. A chunk costs the units that
start in characters not yet sent, so overlapping chunks pay for shared characters
once. The chunk that crosses `B` sends its characters up to its first unit start the
budget cannot pay for, and the budget stops there: no later chunk is sent, however
short. With `B = 10` characters and a ranking of an 8-character chunk, then a
6-character one, then a 2-character one, the first is sent whole, the second sends
its first 2 characters, and the third nothing. Token starts are stored with the chunks
by the chunk stage, each chunk's own text tokenized alone: a word that a chunk
boundary cuts is tokenized as two pieces, so the same characters can cost more tokens
under one chunking than under another. No tokenizer is ever downloaded.
`tokens_to_evidence` is summarised by its mean and two nearest-rank percentiles,
`_p50` and `_p90`: the smallest value with at least half (nine tenths) of the cases at
or below it, a value some case has. It is not the usual median, which averages the
two middle values of an even count: of 100, 200, 300 and 400, `_p50` is 200 where the
median is 250. `counted` gives the cases that reached full availability within the depth.

Span precision and span IoU read a case's evidence spans with offsets. An
`{any: [...]}` unit (alternative spans, as an imported SQuAD question's several
answers) is available when any of its alternatives is, but it is not one span, so it
adds nothing to these two metrics, and a case whose evidence is only such units (or
whole-doc `{doc}` units) has no value for them. Their means, like every mean, are over
the cases that have a value: the metrics JSON gives that count per metric (`counted`).

`judged@k` reads the judged set that `ragvet import trec|beir` keeps for each query
(every judged doc, of any grade: see [import-export.md](import-export.md)). It is
computed only when some case has one, and a native case has no value (never 0 or 1).
It follows ir_measures' `Judged@k`: a retrieved chunk is judged when its doc is, each
chunk of the top k counts (one chunk per document gives ir_measures' figure exactly),
and fewer than k results divide by what was retrieved. Its mean is over answerable
cases, like every other; abstention cases with a judged set have a per-case value.
The report shows it per configuration, and warns when a configuration's
`judged.metric` is more than `judged.max_drop` below its reference's: its recall may
be an artefact of missing judgements.
"""


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def metrics_doc() -> str:
    """``docs/metrics.md``: every registered metric and human review figure, from the
    registry, so the documentation cannot drift from what is computed."""
    header = ["metric", "definition", "comparable across chunkings", "better", "abstention cases", "gateable"]
    rows = [
        [
            f"`{metric.key('B' if metric.budget else 'k')}`",
            md_text(metric.definition, limit=None),
            _yes(metric.comparable_across_chunkings),
            "higher" if metric.higher_is_better else "lower",
            "a value" if metric.abstention else "no value (reported apart)",
            _yes(metric.share and not metric.judgements),
        ]
        for metric in METRICS.values()
    ]
    review = [
        [
            f"`{m.key('k')}`",
            md_text(m.definition, limit=None),
            m.cases,
            _yes(m.comparable_across_chunkings),
            "higher" if m.higher_is_better else "lower",
        ]
        for m in REVIEW_METRICS.values()
    ]
    lines = [METRICS_DOC_INTRO, "## Retrieval and evidence availability", "", *md_table(header, rows), ""]
    lines += [
        "## Human review figures",
        "",
        "Read from recorded answers (`data/answers/<config>.jsonl`), never computed "
        "by a model; see [abstention.md](abstention.md).",
        "",
    ]
    lines += md_table(["metric", "definition", "cases", "comparable across chunkings", "better"], review)
    moving = [[f"`{m.key('k')}`", md_text(m.definition, limit=None)] for m in MOVEMENT.values()]
    lines += [
        "",
        "## Movement from the baseline",
        "",
        "Measured by the verdict stage on every case, labelled or not, against the top-k ranking "
        "`ragvet baseline accept` kept; the gate may guard it in `gate.metrics` (it fails on a share above "
        "`max_drop`). Lower is better. See "
        "[comparisons.md](comparisons.md#what-a-change-moves-on-traffic-nobody-labelled).",
        "",
    ]
    lines += md_table(["metric", "definition"], moving)
    return "\n".join(lines) + "\n"
