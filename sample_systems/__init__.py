"""The sample's own search systems: a real PostgreSQL + pgvector server and a real
HTTP search endpoint (a BM25 app that chunks the corpus its own way, by lines),
both on loopback, run as ragvet configurations (README "Your own search system").

``python -m sample_systems`` (after ``dvc repro``) starts them, runs the
configurations of ``sample_systems/systems.yaml`` as a temporary DVC experiment
and checks the figures that must equal ragvet's own path. CI runs it; the tests
of ``kind: http`` use the same app (:mod:`sample_systems.search_app`).
"""
