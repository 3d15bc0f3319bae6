"""Where shared state lives: one protocol per concern, in memory or in Redis.

Areas talk to `protocols` only; `selection` is the one place that knows which
implementations exist. Atomic operations are one call here, never read-decide-write.
"""
