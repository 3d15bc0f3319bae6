"""Pure data shared by every area: agents, routing decisions, invocations.

Nothing here performs I/O or reads the clock; wire bodies are pydantic models and
hot-path records are slotted dataclasses that orjson serializes directly.
"""
