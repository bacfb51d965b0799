"""Pitfalls: where failed runs leave the workflow the successful runs follow, their conditions,
and the runs outside a cluster they are told from."""
