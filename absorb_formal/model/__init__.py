"""The exact model: blocks, claims and queries (`blocks.py`), activations as mathematics
(`activations.py`), exact rational linear algebra (`linalg.py`), exact reals beyond Q
(`symbolic.py`), exact weight arrays (`exactarray.py`), outcomes (`result.py`), source
positions (`position.py`) and the per-user cache of start-up work (`diskcache.py`)."""
