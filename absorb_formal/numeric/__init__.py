"""Numeric cross-checks in float64: sampled witnesses (numpy, or torch on CPU/GPU), float
sanity figures for refutation certificates, and an adversarial fit (`fit.py`)."""
