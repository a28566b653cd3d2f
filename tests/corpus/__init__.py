"""The corpus in specs/, the stored proofs, the shown transcripts and the baselines."""
