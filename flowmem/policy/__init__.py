"""Decisions that are not induction (pure: no storage, no flows, no SDKs): promotion and
demotion, how a version ranks (its rank factor) and when a candidate on trial is served, what
is scrubbed before storage, how outcomes become usage statistics."""
