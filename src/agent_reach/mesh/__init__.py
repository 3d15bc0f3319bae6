"""The Agent Mesh: an agent hands a sub-task on, on behalf of its caller, through the
coordinator — signed delegation tokens (a chain that only narrows), budgets, and a
kill switch."""
