"""Root-cause analytics over the event and job tables (plain polars; no Dagster)."""
