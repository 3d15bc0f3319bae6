"""Which instance gets a request: matching, factor scoring, the margin rule, the policy.

Routing reads a snapshot (the registry index) and returns an explained decision;
it never touches a store or a socket and never invokes anything.
"""
