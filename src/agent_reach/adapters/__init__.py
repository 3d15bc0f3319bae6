"""Translations between a delivery and a service's own request and answer.

A registration (or a sidecar config) describes the service's request as templates in
one sandboxed template language and its answer as JSON (jmespath) or XML (XPath)
mappings; SOAP 1.1/1.2 envelopes and faults are handled here. Templates never run
code from a registration, and XML is parsed without entities, DTDs or network access.
"""
