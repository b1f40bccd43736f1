"""People's preferences (docs/preferences.md): opt-outs and active hours (pure), their storage, and what the
pipeline does with them (links, headers)."""
