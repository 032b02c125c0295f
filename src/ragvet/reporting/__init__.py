"""Rendering: the markdown and HTML report and its charts (escaping and how figures print: :mod:`ragvet.text`)."""
