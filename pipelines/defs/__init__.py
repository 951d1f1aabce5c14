"""Dagster definitions, one small module per kind (see ``faultline.definitions``)."""
