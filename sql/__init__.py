"""SQL views and named queries shipped with faultline."""
