"""Two groups of ten description-only tools, and a secured coordinator offering them
(the ranked-candidates and `find_tools` tests)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

ADMIN = "ranked-candidates-admin-key-0123456789"
SHOP = {
    "shop.track_parcel": "Track a parcel or shipment by its tracking number: where it is now",
    "shop.refund": "Request a refund of the money paid for a returned order",
    "shop.invoice": "Send a copy of the invoice of an order by email",
    "shop.cancel_order": "Cancel an order that has not shipped yet",
    "shop.change_address": "Change the delivery address of an order",
    "shop.product_search": "Search the product catalog by name, brand or category",
    "shop.stock": "Check whether a product is in stock in a store",
    "shop.coupon": "Apply a discount coupon code to the shopping cart",
    "shop.review": "Write a review and a star rating of a product you bought",
    "shop.gift_card": "Check the balance of a gift card",
}
HR = {
    "hr.payroll": "Run the monthly payroll and pay the employees' salaries",
    "hr.leave": "Book days of vacation or sick leave",
    "hr.onboard": "Create the accounts and the desk of a new employee",
    "hr.expense": "Submit an expense report with receipts for reimbursement",
    "hr.org_chart": "Show who reports to whom in the company",
    "hr.training": "Enroll an employee in a training course",
    "hr.payslip": "Download an employee's payslip for a month",
    "hr.timesheet": "Fill in the hours worked this week",
    "hr.benefits": "Explain the health insurance and pension benefits",
    "hr.offboard": "Close the accounts of an employee who leaves",
}
SCHEMA = {
    "type": "object",
    "properties": {
        "tracking_no": {"type": "string", "pattern": "[A-Z]{2}[0-9]{3,}"},
        "carrier": {"enum": ["sf", "ups"]},
    },
    "required": ["tracking_no"],
}
PARCEL = "where is my parcel? tracking number SF123"


@contextmanager
def secured_catalog(
    settings: Settings, groups: dict[str, dict[str, str]]
) -> Iterator[tuple[str, dict[str, str], FakeAgent]]:
    """A secured coordinator on `settings`' backend with one agent per group of tools
    (its skills' descriptions, the parcel tracker's schema), and a caller key per group
    granted `<group>.*`: (url, group -> key, plus `admin`, the agent)."""
    secured = Settings(**{**settings.model_dump(), "auth": "on", "admin_key": ADMIN})
    agent = FakeAgent(answer={"text": "done"})
    with (
        run_coordinator(secured) as (url, _),
        ServerThread(agent) as server,
        httpx.Client(
            base_url=url, headers={"authorization": f"Bearer {ADMIN}"}, timeout=30
        ) as http,
    ):
        keys = {"admin": ADMIN}
        for group, tools in groups.items():
            skills = [
                {"capability": tag, "description": text}
                | ({"input_schema": SCHEMA} if tag == "shop.track_parcel" else {})
                for tag, text in tools.items()
            ]
            body = {
                "id": f"{group}-agent",
                "capabilities": list(tools),
                "skills": skills,
                "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
            }
            answer = http.post("/v1/agents", json=body)
            assert answer.status_code == 201, answer.text
            grant = {"principal": f"{group}-app", "role": "caller", "capabilities": [f"{group}.*"]}
            answer = http.post("/v1/keys", json=grant)
            assert answer.status_code == 201, answer.text
            keys[group] = answer.json()["key"]
        yield url, keys, agent
