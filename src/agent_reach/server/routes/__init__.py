"""The control-plane endpoints, one module per resource."""
