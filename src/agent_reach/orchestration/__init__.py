"""Orchestration: workflows, DAGs of capability steps run on top of the invoke path.

It decides which steps run when, what each step is sent (templates), what the run
answers (aggregation) and where a run stands; every step is one `InvokeService` call
with the request id `<run_id>:<step_id>`. It must never deliver to an agent itself,
nor run a step whose outcome the run store already holds.
"""
