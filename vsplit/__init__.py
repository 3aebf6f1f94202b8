"""vsplit: vertical split learning for finance."""

__version__ = "0.1.0"
