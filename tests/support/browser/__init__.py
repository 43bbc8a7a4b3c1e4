"""Shared test helpers (support/browser)."""
