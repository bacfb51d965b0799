"""Prefect flows (the only subpackage that imports prefect): `pipeline` holds the collect,
induce, learn and cycle flows as thin tasks around `flowmem.jobs`; `serve` serves them on
their schedules (`flowmem serve`, mirrored by deployments/prefect.yaml)."""
