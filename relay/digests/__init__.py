"""Digests (docs/delivery.md): the window and the key (pure), the open digests in Redis, gathering and sending."""
