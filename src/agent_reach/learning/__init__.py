"""What the router learns, kept in the shared store: corrections and 421 "not mine" answers.

This package remembers routed texts so their callers can correct them, turns corrections
into learned examples, and keeps every coordinator's snapshot of them current. It never
decides a route: the routing package reads the snapshot it publishes.
"""
