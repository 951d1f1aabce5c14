"""Versioned rule data: taxonomy, Xid catalog, line rules, trained models."""
