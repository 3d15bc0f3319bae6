"""Transports that translate a delivery: to an A2A agent, or to a service's own HTTP request."""
