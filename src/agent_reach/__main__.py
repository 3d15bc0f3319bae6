"""`python -m agent_reach ...` runs the `agent-reach` command line."""

from agent_reach.cli import app

app(prog_name="agent-reach")
