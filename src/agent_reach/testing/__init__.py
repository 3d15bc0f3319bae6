"""The public test kit: real coordinators and agents on loopback, a manual clock.

Use it to test agents and callers against a real Agent-Reach in one process; it
never mocks the network.
"""
