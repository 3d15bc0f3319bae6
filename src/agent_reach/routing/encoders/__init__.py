"""Sentence encoders of the embedding matcher: the packaged one, or a remote service.

`spec.py` resolves which encoder the settings and the policy ask for; `remote.py` calls
any OpenAI-compatible embeddings service, validates what it answers, caches card-text
vectors in the backend's `EmbeddingStore` and keeps the service's health. An encoder
never raises anything but `EncoderUnavailable` for a service problem, so the matching
pipeline can always answer with the packaged encoder instead.
"""
