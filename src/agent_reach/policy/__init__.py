"""The policy: one versioned document of everything the coordinator decides by, and its source."""
