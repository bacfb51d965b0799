"""Planning an induction run: what it refits, induces, defers and revives, in bounded memory."""
