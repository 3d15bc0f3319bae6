"""Who is out there: registrations, leases, heartbeats and instance health.

The registry writes through a `RegistryStore` and serves reads from a local index,
so routing never waits on a store. It never delivers requests itself.
"""
