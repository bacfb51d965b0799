"""Clustering: each agent's runs grouped by task (HDBSCAN), and new tasks placed in a stored fit."""
