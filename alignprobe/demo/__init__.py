"""The demo and its fixtures: seeded tiny models, a byte-level tokenizer, planted-fault scenarios.

None of this is the library: ``alignprobe demo``, the tests and the notebook use it to make
dumps of known faults without downloading a model.
"""
