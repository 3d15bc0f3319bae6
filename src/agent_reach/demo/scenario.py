"""The customer-service scenario of the original write-ups, as real SDK agents.

Five services answer a shop's customers: orders, logistics, product questions,
inventory (two instances behind one capability) and a human hand-off that takes
whatever nothing else can. Every handler answers from the payload with a small
JSON document whose `answer` is the sentence a customer would read.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from agent_reach.sdk.agent import Agent, AgentRequest

DOMAIN = "customer-service"
# The ERP behind the inventory agents takes tens of milliseconds per lookup; the
# delay also keeps a burst's requests in flight together, so load spreads them.
ERP_LOOKUP_S = 0.05

ORDERS: dict[str, dict[str, Any]] = {
    "A1001": {
        "status": "已发货",
        "items": ["X5 Pro 手机 蓝色 256G"],
        "tracking_no": "SF1234567890",
    },
    "A1002": {"status": "待付款", "items": ["无线耳机 Air 2"], "tracking_no": None},
    "A1003": {"status": "已签收", "items": ["65W 快充头", "数据线"], "tracking_no": "YT9876543210"},
}
TRACKING = {
    "SF1234567890": ("顺丰速运", "上海转运中心", "预计明天送达"),
    "YT9876543210": ("圆通速递", "北京朝阳区", "已签收"),
}
FAQ = {
    "无线充电": "X5 Pro 支持 15W 无线充电。",
    "保修": "整机保修一年，电池保修六个月。",
    "退货": "签收后 7 天内可无理由退货。",
    "发票": "下单时可选电子发票，发货后发送到邮箱。",
}
STOCK = {
    "X5PRO-BLU-256": ("X5 Pro 蓝色 256G", 42),
    "X5PRO-BLK-512": ("X5 Pro 黑色 512G", 0),
    "AIR2-WHT": ("无线耳机 Air 2 白色", 318),
}


@dataclass(frozen=True, slots=True)
class Ask:
    """One scripted customer request: the capability it needs and what the customer said."""

    capability: str
    text: str
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def payload(self) -> dict[str, Any]:
        return {"text": self.text, **self.fields}


# Each inner list is sent at once; the 4-request burst shows load spreading inventory.
SCRIPT: list[list[Ask]] = [
    [Ask("order.query", "我的订单 A1001 到哪一步了？", {"order_id": "A1001"})],
    [Ask("logistics.track", "快递 SF1234567890 现在到哪了？", {"tracking_no": "SF1234567890"})],
    [Ask("product.faq", "X5 Pro 支持无线充电吗？", {"product": "X5 Pro"})],
    [Ask("inventory.check", "X5 Pro 蓝色 256G 还有货吗？", {"sku": "X5PRO-BLU-256"})],
    [Ask("order.query", "订单 A1002 为什么还没发货？", {"order_id": "A1002"})],
    [Ask("product.faq", "手机保修多久？", {"product": "X5 Pro"})],
    [Ask("human.handoff", "我要投诉，帮我转人工客服！", {"reason": "complaint"})],
    [
        Ask("inventory.check", "黑色 512G 的有现货吗？", {"sku": "X5PRO-BLK-512"}),
        Ask("inventory.check", "Air 2 耳机白色还有吗？", {"sku": "AIR2-WHT"}),
        Ask("inventory.check", "蓝色 256G 能买两台吗？", {"sku": "X5PRO-BLU-256", "quantity": 2}),
        Ask("inventory.check", "Is the X5 Pro blue 256G in stock?", {"sku": "X5PRO-BLU-256"}),
    ],
    [Ask("logistics.track", "YT9876543210 签收了吗？", {"tracking_no": "YT9876543210"})],
    [Ask("product.faq", "签收后还能退货吗？", {"product": "X5 Pro"})],
    [Ask("order.query", "A1003 这单买了什么？", {"order_id": "A1003"})],
]
# Sent after one inventory instance has been stopped.
SCRIPT_AFTER_STOP: list[list[Ask]] = [
    [Ask("inventory.check", "现在蓝色 256G 还有货吗？", {"sku": "X5PRO-BLU-256"})],
    [
        Ask("inventory.check", "Air 2 还有几副？", {"sku": "AIR2-WHT"}),
        Ask("inventory.check", "黑色 512G 什么时候补货？", {"sku": "X5PRO-BLK-512"}),
        Ask("inventory.check", "帮我看看蓝色 256G 的库存", {"sku": "X5PRO-BLU-256"}),
    ],
]


def order_service(coordinator_url: str) -> Agent:
    agent = Agent(
        "order-service",
        ["order.query"],
        coordinator_url=coordinator_url,
        display_name="订单查询",
        description="订单状态、订单内容、发货进度",
        examples=[  # a card's examples: what customers say, not the scripted requests
            "我的订单到哪一步了",
            "订单为什么还没发货",
            "帮我查一下订单状态",
            "我上周下的单买了哪些东西",
            "订单号 A2001 是什么情况",
            "我的订单发货了没有",
            "订单里有哪些商品",
            "check my order status",
        ],
        domain=DOMAIN,
    )

    @agent.handler
    async def query(request: AgentRequest) -> dict[str, Any]:
        order_id = request.payload.get("order_id", "")
        order = ORDERS.get(order_id)
        if order is None:
            return {"order_id": order_id, "found": False, "answer": f"没有找到订单 {order_id}"}
        items = "、".join(order["items"])
        return {
            "order_id": order_id,
            **order,
            "answer": f"订单 {order_id}：{order['status']}（{items}）",
        }

    return agent


def logistics_track(coordinator_url: str) -> Agent:
    agent = Agent(
        "logistics-track",
        ["logistics.track"],
        coordinator_url=coordinator_url,
        display_name="物流查询",
        description="快递单号、物流轨迹、预计送达时间",
        examples=[
            "我买的东西怎么还没到",
            "快递到哪了",
            "运单号 ZT1234 到哪里了",
            "包裹什么时候能送到",
            "快递显示已签收但我没收到",
            "物流信息一直没更新",
            "签收了没有",
            "where is my parcel",
        ],
        domain=DOMAIN,
    )

    @agent.handler
    async def track(request: AgentRequest) -> dict[str, Any]:
        number = request.payload.get("tracking_no", "")
        known = TRACKING.get(number)
        if known is None:
            return {"tracking_no": number, "found": False, "answer": f"查不到运单 {number}"}
        carrier, location, eta = known
        return {
            "tracking_no": number,
            "carrier": carrier,
            "location": location,
            "eta": eta,
            "answer": f"{carrier} {number}：{location}，{eta}",
        }

    return agent


def faq_service(coordinator_url: str) -> Agent:
    agent = Agent(
        "faq-service",
        ["product.faq"],
        coordinator_url=coordinator_url,
        display_name="产品问答",
        description="产品功能、保修、退换货、发票等常见问题",
        examples=[
            "支持无线充电吗",
            "保修多久",
            "这款手机防水吗",
            "可以开发票吗",
            "七天无理由退货怎么操作",
            "退货政策是什么",
            "耳机怎么连接手机",
            "does it support fast charging",
        ],
        domain=DOMAIN,
    )

    @agent.handler
    async def answer(request: AgentRequest) -> dict[str, Any]:
        text = request.payload.get("text", "")
        for topic, reply in FAQ.items():
            if topic in text:
                return {"topic": topic, "answer": reply}
        return {"topic": None, "answer": "这个问题我记下了，稍后由专员回复您。"}

    return agent


def inventory(instance_id: str, warehouse: str, coordinator_url: str) -> Agent:
    """One instance of `inventory.check`; several may run side by side."""
    agent = Agent(
        instance_id,
        ["inventory.check"],
        coordinator_url=coordinator_url,
        display_name="库存查询",
        description="商品库存、有没有货、能买几件",
        examples=[
            "这款手机有蓝色256G吗",
            "还有货吗",
            "白色的什么时候到货",
            "现在下单有现货吗",
            "这个颜色缺货了吗",
            "库存还剩多少",
            "什么时候补货",
            "还有几件",
            "is this model in stock",
        ],
        domain=DOMAIN,
    )

    @agent.handler
    async def check(request: AgentRequest) -> dict[str, Any]:
        await asyncio.sleep(ERP_LOOKUP_S)
        sku = request.payload.get("sku", "")
        wanted = int(request.payload.get("quantity", 1))
        name, quantity = STOCK.get(sku, (sku, 0))
        verdict = "有货" if quantity >= wanted else "暂时缺货"
        return {
            "sku": sku,
            "quantity": quantity,
            "in_stock": quantity >= wanted,
            "warehouse": warehouse,
            "answer": f"{name}：{verdict}（{warehouse}库存 {quantity}）",
        }

    return agent


def human_service(coordinator_url: str) -> Agent:
    agent = Agent(
        "human-service",
        ["human.handoff"],
        coordinator_url=coordinator_url,
        display_name="人工客服",
        description="转人工、投诉、其他问题",
        examples=["转人工", "我要投诉"],
        domain=DOMAIN,
        generic=True,
    )

    @agent.handler
    async def hand_off(request: AgentRequest) -> dict[str, Any]:
        ticket = f"T-{request.request_id[:8].upper()}"
        return {"ticket": ticket, "queue": "售后", "answer": f"已为您转接人工客服，工单 {ticket}"}

    return agent


def build_agents(coordinator_url: str) -> list[Agent]:
    """Every agent of the scenario, inventory as two instances in two warehouses."""
    return [
        order_service(coordinator_url),
        logistics_track(coordinator_url),
        faq_service(coordinator_url),
        inventory("inventory-01", "上海仓", coordinator_url),
        inventory("inventory-02", "广州仓", coordinator_url),
        human_service(coordinator_url),
    ]
