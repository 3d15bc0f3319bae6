"""Text matchers: user text -> capabilities with calibrated confidences, cheapest first.

One `Matcher` protocol (`protocol.py`) and one file per implementation (lexical n-grams,
sentence embeddings, an LLM intent parser; the embedding matcher's classifier is
`classifier.py`, fitted by `logistic.py`, and its micro-batcher `batching.py`);
`pipeline.py` asks them in the policy's order, stops at the first confident one and
caches the answer, `blending.py` makes one answer of theirs, `refitting.py` runs the job
that refits them when the catalog changes, `calibrating.py` fits and calibrates them on
the catalog in force, and `encoder_lifecycle.py` brings a remote sentence encoder in and
out. Matchers only score text against the registry's capability cards: they never pick
an instance or touch a store.
"""
