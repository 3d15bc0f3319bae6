"""Admission counting with plain data: the limits, and a policy change mid-flight."""

from __future__ import annotations

from agent_reach.backends.memory.tasks import MemoryAnswerCache
from agent_reach.clock import ManualClock
from agent_reach.invoke.admission import Admission, Ticket
from agent_reach.invoke.answer_memory import AnswerMemory
from agent_reach.model.admission import AdmissionPolicy
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex


def gate(max_in_flight: int, policy: list[Policy]) -> Admission:
    answers = AnswerMemory(MemoryAnswerCache(ManualClock(), 1 << 20), 1 << 20, RegistryIndex())
    return Admission(max_in_flight, lambda: policy[0], answers, Metrics())


def limited(**limits: int) -> Policy:
    return Policy(admission=AdmissionPolicy(max_in_flight=limits))


def test_the_coordinator_limit_refuses_the_request_past_it_and_frees_on_leave():
    admission = gate(2, [Policy()])
    first, second = admission.enter("a.b"), admission.enter(None)
    assert isinstance(first, Ticket) and isinstance(second, Ticket)
    assert admission.enter("a.b") == "coordinator"
    admission.leave(first)
    assert isinstance(admission.enter("c.d"), Ticket)
    assert admission.in_flight == 2


def test_a_capability_limit_counts_only_its_own_capability():
    admission = gate(0, [limited(**{"slow.cap": 1})])
    held = admission.enter("slow.cap")
    assert isinstance(held, Ticket)
    assert admission.enter("slow.cap") == "capability"
    assert all(isinstance(admission.enter("fast.cap"), Ticket) for _ in range(50))
    admission.leave(held)
    assert isinstance(admission.enter("slow.cap"), Ticket)


def test_a_limit_added_or_removed_mid_flight_never_miscounts():
    policy = [Policy()]
    admission = gate(0, policy)
    uncounted = admission.enter("slow.cap")  # admitted before the limit existed
    policy[0] = limited(**{"slow.cap": 1})
    counted = admission.enter("slow.cap")
    assert isinstance(uncounted, Ticket) and isinstance(counted, Ticket)
    admission.leave(uncounted)  # must not free the counted one's slot
    assert admission.enter("slow.cap") == "capability"
    policy[0] = Policy()
    admission.leave(counted)
    assert admission.in_flight == 0
    policy[0] = limited(**{"slow.cap": 1})
    assert isinstance(admission.enter("slow.cap"), Ticket)
