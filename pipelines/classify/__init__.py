"""Classification of log messages into the failure taxonomy (rules first, model second)."""
