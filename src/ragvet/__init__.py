"""ragvet: offline evaluation of RAG retrieval as a DVC pipeline.

Layers, top down; a module imports only from its own layer and those below it
(docs/architecture.md, tests/test_architecture.py):

* the commands: ``cli`` gathers them; ``stages`` holds one module per DVC stage
  (validate, chunk, split, retrieve, evaluate, report, gate); ``tune_abstain``,
  ``freeze_labels`` and ``interop`` are the other commands, and ``project``,
  ``upgrade`` and ``pinning`` make, upgrade and pin a user project;
* the domain code they share, named for what it holds: ``inputs``, ``reporting``,
  ``gating``, ``measures``, ``retrieval`` (its ``specs`` below its runs), and
  ``formats``, ``evidence``, ``chunking``, ``splitting``;
* the data model: ``schema``, ``errors`` and ``storage``;
* the ground, ``text``: escaping, formatting, scalar checks, YAML with lines;
* ``template``: the files a user project is made of (package data, no code).
"""
