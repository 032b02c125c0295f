"""The pipeline's stages, one thin typer command each, as dvc.yaml runs them.

Each module parses its options, reads its inputs, calls the library and writes its
outputs; ``ragvet <stage>`` runs its ``main`` (cli.py). No stage imports another.
"""
