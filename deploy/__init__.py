"""Deployment files: the Dagster instance configs, the workspace, Helm values."""
