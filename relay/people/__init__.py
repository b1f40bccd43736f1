"""The pages people reach from their notifications: their preferences and one-click unsubscribe."""
