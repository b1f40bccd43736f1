"""A channel that is down (docs/delivery.md): its state machine (pure), its storage, what a send does to it."""
