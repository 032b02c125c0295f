"""Print digests of MiniLM vectors, a dense run and cross-encoder scores, computed in this fresh process.

    python tests/kernel_probe.py CROSS_ENCODER_DIR BATCH_SIZE PRECISION ORDER THREADS

Run by tests/retrieval/test_embedding.py under settings that simulate another machine: the
float kernels a CPU would pick (ATEN_CPU_CAPABILITY, MKL_CBWR, ONEDNN_MAX_CPU_ISA),
the thread count (THREADS, more than the cores allowed: the split of work is what
changes), the batch size and the input order (ORDER:
``asis`` or ``shuffled``). ``raw`` digests the float vectors before ragvet rounds them
to its grid, so the probe shows when a setting really changed the arithmetic.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys

import numpy as np

from ragvet.retrieval import embedding
from ragvet.retrieval.dense import cross_encoder_scores_many, dense_run
from ragvet.retrieval.models import DEFAULT_MODEL
from ragvet.schema import Case, Chunk

TEXTS = [
    "Employees may carry up to five unused vacation days into the next plan year.",
    "To reset your password, open the self-service portal and follow the emailed link.",
    "Lost badges must be reported to the security desk immediately.",
    "The cafeteria serves lunch from noon until two o'clock on weekdays.",
    "Parking permits are renewed every January at the front desk.",
    "Sick leave shorter than three days needs no doctor's note.",
    "Expense reimbursement for business travel: airfare, hotels and meals are refunded once receipts are filed.",
    "Travel must be booked through the corporate agency at least two weeks in advance.",
    "The VPN token is reset by the service desk after a call-back to your registered phone.",
    "Remote work needs a manager's written approval and a signed equipment agreement.",
]
QUESTIONS = ["How do I get my money back for a work trip?", "vpn token reset", "Can unused holiday be moved?"]


def digest(values) -> str:
    return hashlib.sha256(
        json.dumps(values, sort_keys=True).encode() if isinstance(values, list) else values
    ).hexdigest()


def main(cross_dir: str, batch_size: int, precision: str, order: str, threads: int) -> None:
    embedding.load_encoder(DEFAULT_MODEL, precision)  # first, so torch loads with ragvet's kernels
    import torch

    torch.set_num_threads(threads)
    texts = list(TEXTS)
    if order == "shuffled":
        random.Random(7).shuffle(texts)
    raw: list[np.ndarray] = []
    grid = embedding.grid_vectors

    def keep_raw(vectors: np.ndarray) -> np.ndarray:
        raw.append(np.asarray(vectors, dtype=np.float64))
        return grid(vectors)

    embedding.grid_vectors = keep_raw  # the same rounding, with the float input kept aside
    vectors, _ = embedding.embed_texts(texts, batch_size=batch_size, precision=precision)
    embedding.grid_vectors = grid
    by_text = dict(zip(texts, vectors))
    raw_by_text = dict(zip(sorted(texts, key=embedding.text_hash), np.concatenate(raw)))
    ids = {text: f"doc-{number:02d}" for number, text in enumerate(TEXTS)}  # the same ids in any order
    chunks = [Chunk(f"{ids[t]}#0", ids[t], 0, 0, len(t), t, {}) for t in texts]
    cases = [Case(f"q{i}", q) for i, q in enumerate(QUESTIONS)]
    spec = {"kind": "dense", "batch_size": batch_size, "precision": precision}
    rows = sorted(dense_run(cases, chunks, spec, 5), key=lambda r: (r["case_id"], r["rank"]))
    pairs = [(QUESTIONS[0], texts), (QUESTIONS[1], texts[::-1])]
    logits = cross_encoder_scores_many(cross_dir, pairs, batch_size, precision)

    print(
        json.dumps(
            {
                "capability": torch.backends.cpu.get_cpu_capability(),
                "threads": torch.get_num_threads(),
                "raw": digest(np.stack([raw_by_text[t] for t in TEXTS]).tobytes()),
                "vectors": digest(np.stack([by_text[t] for t in TEXTS]).tobytes()),
                "run": digest(rows),
                "cross": digest(
                    [dict(zip(texts_of, map(float, values))) for (_, texts_of), values in zip(pairs, logits)]
                ),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
