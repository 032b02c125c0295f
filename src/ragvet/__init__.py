"""ragvet: offline evaluation of RAG retrieval as a DVC pipeline.

Three layers, imports running one way (docs/architecture.md, tests/test_architecture.py):

* the commands: ``cli`` gathers them; ``stages`` holds one module per DVC stage
  (validate, chunk, split, retrieve, evaluate, report, gate); ``tune_abstain``,
  ``freeze_labels``, ``interop``, ``project`` and ``upgrade`` are the other commands;
* the domain code they share, named for what it holds: ``schema``, ``errors``,
  ``evidence``, ``chunking``, ``splitting``, ``pinning`` and the subpackages
  ``inputs``, ``retrieval``, ``measures``, ``gating``, ``reporting``, ``storage``, ``formats``;
* ``template``: the files a user project is made of (package data, no code).
"""
