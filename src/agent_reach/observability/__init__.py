"""Logging, trace context and spans, metrics and the decision log: what operators see.

Nothing here decides anything; it records what the other areas decided, and never
logs request bodies or secrets.
"""
