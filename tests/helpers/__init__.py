"""Builders shared by the tests (imported, never collected)."""
