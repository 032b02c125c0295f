"""ragvet: offline evaluation of RAG retrieval as a DVC pipeline.

The top of the package holds the commands: one thin typer module per DVC stage
(validate, chunk, split, retrieve, evaluate, report, gate), tune_abstain and
interop, and cli, which gathers them. The domain code they share is named for what
it holds: schema, errors, evidence, chunking and splitting here, and the
subpackages inputs, retrieval, measures, gating, reporting, storage and formats.
Imports run one way, from the commands down (tests/test_architecture.py).
"""
