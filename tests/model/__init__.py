"""The exact model: activations, biases, evaluation, the start-up cache."""
