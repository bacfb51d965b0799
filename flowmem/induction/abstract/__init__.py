"""Abstraction: a cluster's runs become steps with placeholders, loops, segments and sub-routines."""
