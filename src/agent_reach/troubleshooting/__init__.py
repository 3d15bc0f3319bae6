"""Troubleshooting: what happened to one request, in the order an operator checks it.

The journal keeps the last answers and the context agents read; the walk joins them
with the routing decision, the instance history and the trace, and names the first
step that looks wrong. Nothing here is on the request path but one append.
"""
