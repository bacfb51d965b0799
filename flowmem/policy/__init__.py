"""Decisions that are not induction (pure: no storage, no flows, no SDKs): which versions are
served and how they rank, promotion and demotion, what is scrubbed before storage, how outcomes
become usage statistics."""
