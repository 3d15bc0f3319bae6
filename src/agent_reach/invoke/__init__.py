"""Getting a request to the chosen instance: delivery, transports, attempts.

The invoker asks routing for a decision and a transport for the delivery; it owns
what happens between them (timeouts, stats) and never chooses instances itself.
"""
