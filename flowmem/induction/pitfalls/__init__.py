"""Pitfalls: where failed runs leave the workflow the successful runs follow, and their conditions."""
