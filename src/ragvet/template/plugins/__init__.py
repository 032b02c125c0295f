"""Your own retrievers, for configurations of kind ``python``.

A retriever here is ``def search(cases, chunks, **options)``: ``cases`` is a list
of ``{"id", "question", "filter"}``, ``chunks`` a pandas DataFrame of the chunk
table; it returns ``{case_id: [(chunk_id, score), ...]}``. Reference it in
params.yaml as ``target: plugins.<module>:search``. dvc.yaml lists this folder
as a dependency of every retrieve stage, so editing a plugin re-runs them.
"""
