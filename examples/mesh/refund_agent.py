# examples/mesh/refund_agent.py: agent B, the refund specialist. Each call costs 5
# units of the delegation chain's budget; it checks on whose behalf and through whom
# it was called.
import os

from agent_reach import Agent, AgentRequest, DelegationVerifier

COORDINATOR = "http://127.0.0.1:8500"
agent = Agent("refund-01", ["refund.issue"], coordinator_url=COORDINATOR,
              description="issue a refund for an order", cost=5,
              api_key=os.environ["REFUND_AGENT_KEY"])
verifier = DelegationVerifier(COORDINATOR)   # the coordinator's keys: /.well-known/jwks.json


@agent.handler
async def issue(request: AgentRequest) -> dict:
    seen = await verifier.verify(request.delegation["token"])
    return {"order": request.payload["order"], "refunded": True,
            "on_behalf_of": seen.caller, "through": [hop.agent for hop in seen.chain]}

agent.serve(port=9051)
