"""Prefect flows: the only subpackage that imports prefect. Empty until the flows land."""
