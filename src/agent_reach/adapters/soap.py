"""SOAP 1.1 and 1.2: envelopes around a body, the SOAPAction, faults as agent errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lxml import etree

from agent_reach.errors import AgentFailed

SoapVersion = Literal["1.1", "1.2"]
ENVELOPE_NS: dict[str, str] = {
    "1.1": "http://schemas.xmlsoap.org/soap/envelope/",
    "1.2": "http://www.w3.org/2003/05/soap-envelope",
}


@dataclass(frozen=True, slots=True)
class Envelope:
    """How one SOAP version frames a call."""

    version: SoapVersion

    @property
    def namespace(self) -> str:
        return ENVELOPE_NS[self.version]

    def wrap(self, body_xml: str) -> bytes:
        return (
            '<?xml version="1.0" encoding="utf-8"?>'
            f'<soap:Envelope xmlns:soap="{self.namespace}"><soap:Body>{body_xml}'
            "</soap:Body></soap:Envelope>"
        ).encode()

    def headers(self, action: str | None) -> list[tuple[str, str]]:
        """1.1 names the action in `SOAPAction`; 1.2 in the content type's `action`."""
        if self.version == "1.1":
            return [
                ("content-type", "text/xml; charset=utf-8"),
                ("soapaction", f'"{action or ""}"'),
            ]
        kind = "application/soap+xml; charset=utf-8"
        return [("content-type", f'{kind}; action="{action}"' if action else kind)]

    def raise_fault(self, root: etree._Element) -> None:
        """`AgentFailed` (`soap_fault`, 502, not retried) when the answer is a fault."""
        ns = {"soap": self.namespace}
        fault = root.find("soap:Body/soap:Fault", ns)
        if fault is None:
            return
        if self.version == "1.1":
            code = fault.findtext("faultcode") or ""
            reason = fault.findtext("faultstring") or ""
        else:
            code = fault.findtext("soap:Code/soap:Value", namespaces=ns) or ""
            reason = fault.findtext("soap:Reason/soap:Text", namespaces=ns) or ""
        raise AgentFailed(  # the service decided; it would again: final
            f"the service answered a SOAP fault: {code.strip()}: {reason.strip()}",
            code="soap_fault",
            retryable=False,
            fault_code=code.strip(),
            fault_string=reason.strip(),
        )
