"""Tokenizing a chunking's texts for a budget that counts tokens (:mod:`ragvet.measures.tokens`
names and loads the tokenizer; this module needs numpy, which checking params must not load)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ragvet.storage.columns import TokenStarts

BATCH_CHARS = 2**18  # characters of text per call of the tokenizer (see token_starts)


def token_starts(tokenizer, texts: Sequence[str], batch_chars: int = BATCH_CHARS) -> TokenStarts:
    """Per text, the distinct offsets at which its tokens start, ascending.

    Two tokens starting at one character (a normaliser may split one) are one unit:
    a budget pays for the characters it sends, and that character is sent once.
    Texts go to the tokenizer in runs of about ``batch_chars`` characters (a longer
    text alone), because its encodings cost some 100 bytes a token: the whole
    chunking at once would hold the corpus about 40 times over. Each run's starts
    become one integer array at once (:class:`TokenStarts`).
    """
    dtype = np.int64 if max(map(len, texts), default=0) >= 2**31 else np.int32
    counts = np.zeros(len(texts), np.int64)
    runs = []
    for first, last in _runs(texts, batch_chars):
        run: list[int] = []
        for index, encoding in enumerate(tokenizer.encode_batch(list(texts[first:last]), add_special_tokens=False)):
            starts = sorted({start for start, end in encoding.offsets if end > start})
            counts[first + index] = len(starts)
            run += starts
        runs.append(np.array(run, dtype))
    offsets = np.concatenate(runs) if runs else np.zeros(0, dtype)
    return TokenStarts(np.concatenate(([0], np.cumsum(counts))), offsets)


def _runs(texts: Sequence[str], batch_chars: int) -> Iterator[tuple[int, int]]:
    """``[first, last)`` ranges of consecutive texts of at most ``batch_chars`` characters
    together, each holding at least one text."""
    first, size = 0, 0
    for index, text in enumerate(texts):
        if index > first and size + len(text) > batch_chars:
            yield first, index
            first, size = index, 0
        size += len(text)
    if first < len(texts):
        yield first, len(texts)
