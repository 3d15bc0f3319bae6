# examples/mesh/customer.py: the caller. Asks cs.answer for a refund with the budget
# given as the first argument (cost units the whole chain may spend).
import os
import sys

from agent_reach import SyncReachClient

with SyncReachClient("http://127.0.0.1:8500", api_key=os.environ["CUSTOMER_KEY"]) as reach:
    answer = reach.invoke("cs.answer", text="I want a refund for order A-1001",
                          payload={"order": "A-1001"}, budget=float(sys.argv[1]))
    print(answer.agent_id, answer.result)
