"""Shared test helpers (support)."""
