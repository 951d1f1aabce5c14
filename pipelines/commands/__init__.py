"""One module per CLI command; ``faultline.cli`` registers them."""
