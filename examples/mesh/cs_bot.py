# examples/mesh/cs_bot.py: agent A, a customer-service bot. It answers FAQs itself
# and hands refunds on to refund.issue, on behalf of its caller, with the delivery's
# delegation token.
import os

from agent_reach import Agent, AgentRequest, ReachError

agent = Agent("cs-bot-01", ["cs.answer"], coordinator_url="http://127.0.0.1:8500",
              description="customer service: questions, refunds",
              api_key=os.environ["CS_AGENT_KEY"])


@agent.handler
async def answer(request: AgentRequest) -> dict:
    if "refund" not in (request.text or ""):
        return {"answer": "Orders ship within two days."}
    try:
        handed = await request.delegate("refund.issue", payload=request.payload, suspend=False)
    except ReachError as refused:            # told truthfully, never papered over
        return {"answer": "I could not hand your refund on.", "refused": refused.code}
    return {"answer": "Your refund is on its way.", "refund": handed.result}

agent.serve(port=9050)
