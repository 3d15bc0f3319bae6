"""Which instance gets a request: matching, factor scoring, the margin rule.

Routing reads a snapshot (the registry index) and the policy in force (`policy/`) and
returns an explained decision; deciding never invokes anything.
"""
