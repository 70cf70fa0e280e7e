"""Everything of kctl that does I/O, around the pure core (`controller_core`): one package per
concern, imports pointing only down (README "How it is built"; `tests/test_layers.py`)."""
