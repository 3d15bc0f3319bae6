"""Shared task context: JSON documents with a version and a ttl, read through projections.

This package decides what a context may hold (limits), how writes combine (merge patch,
append to segmented lists, compare-and-set by version), what a scoped token opens, and
when a context may go (ttl, references from in-flight requests, the sweeper). It never
stores anything itself: every read and write is one call on a `ContextStore`.
"""
