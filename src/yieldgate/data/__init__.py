"""Data: the built-in corpus, recipe resolution, dedup, pipeline audit, and the stream-duplicate counter."""
