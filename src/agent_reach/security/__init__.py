"""Who may do what: API keys and their grants, access rules, ownership and visibility
checks, quotas and the endpoint guard.

Deny by default. This package decides and never stores secrets in plaintext: keys
are kept as SHA-256 digests and compared in constant time; it never routes or
delivers anything itself.
"""
