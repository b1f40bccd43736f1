"""Silences (docs/silences.md): the model and its matching (pure), and its storage."""
