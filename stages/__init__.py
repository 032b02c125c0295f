"""ragvet: offline evaluation of RAG retrieval as a DVC pipeline.

Stage modules (validate, chunk, split, retrieve, evaluate, report, gate) are thin
typer commands; the domain code they share lives in schema, evidence, chunking,
retrieval, metrics, gating and reporting.
"""
