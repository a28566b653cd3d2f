"""The independent checker: verdicts, its own readers and lemmas, forgeries refused."""
