"""What each retriever kind accepts in ``params.retrievers``: its keys and their checks, without numpy."""
