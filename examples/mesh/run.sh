# examples/mesh/run.sh: the mesh's worked example (docs/mesh.md); from the repository's
# root: bash examples/mesh/run.sh
# A customer asks cs-bot (agent A) for a refund; cs-bot hands it on to refund-01
# (agent B) on the customer's behalf, within the customer's budget. Then the same ask
# with too small a budget (refused before anything reaches B), and with B taken out by
# the kill switch. Everything runs in a scratch folder; the coordinator is in memory.
set -euo pipefail
trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
export PATH="$root/.venv/bin:$PATH"   # agent-reach and python from the repository's .venv
cd "$(mktemp -d)"
export AR_ADMIN_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(24))')
export AR_COORDINATOR_URL=http://127.0.0.1:8500
AR_POLICY_FILE="$here/policy.toml" AR_DECISION_LOG=decisions.jsonl agent-reach serve --port 8500 2>serve.log &
until python -c "import urllib.request as u; u.urlopen('$AR_COORDINATOR_URL/healthz')" 2>/dev/null; do sleep 0.2; done

# One key per principal: the two agents, and the customer (who may use cs.* and refund.*).
key() { agent-reach keys create --api-key "$AR_ADMIN_KEY" "$@" | tail -n 1; }
export CS_AGENT_KEY=$(key --principal cs-agents --role agent --capability 'cs.*')
export REFUND_AGENT_KEY=$(key --principal refund-agents --role agent --capability 'refund.*')
export CUSTOMER_KEY=$(key --principal shop-frontend --role caller --capability 'cs.*' --capability 'refund.*')

python "$here/refund_agent.py" >refund.log 2>&1 &
python "$here/cs_bot.py" >cs.log 2>&1 &
until agent-reach agents list --api-key "$AR_ADMIN_KEY" | grep -q cs-bot-01 \
  && agent-reach agents list --api-key "$AR_ADMIN_KEY" | grep -q refund-01; do sleep 0.5; done

echo "== a budget of 10: the refund (cost 5) is handed on"
python "$here/customer.py" 10
echo "== a budget of 3: refused before anything reaches refund-01"
python "$here/customer.py" 3
echo "== the kill switch: refund-01 out of routing"
curl -s -X POST "$AR_COORDINATOR_URL/v1/agents/refund-01/disable" -H "Authorization: Bearer $AR_ADMIN_KEY"; echo
python "$here/customer.py" 10
curl -s -X POST "$AR_COORDINATOR_URL/v1/agents/refund-01/enable" -H "Authorization: Bearer $AR_ADMIN_KEY"; echo
