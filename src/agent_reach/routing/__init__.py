"""Which instance gets a request: matching, factor scoring, the margin rule, the policy.

Routing reads a snapshot (the registry index) and returns an explained decision;
deciding never touches a store or a socket and never invokes anything. Only
`policy_source`, which keeps the policy in force in step with its file and the
policy store, does I/O, and outside any decision.
"""
