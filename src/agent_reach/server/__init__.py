"""The coordinator's HTTP face: the app factory, the invoke fast path and the control plane.

It translates between HTTP and the areas; it decides nothing itself and never
renders a traceback: every failure leaves as `{"error": {"code", "message"}}`.
"""
