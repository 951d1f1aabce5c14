"""Reading log files into line frames and parsing their prefixes (no Dagster)."""
