"""The OpenAPI document of relay's HTTP API (GET /openapi.json)."""

from __future__ import annotations

from typing import Any

from relay import __version__

_ERROR = {"$ref": "#/components/schemas/Error"}
# A duration back from now (90s, 2h, 1h30m, 7d) or an ISO 8601 date or time.
SINCE_PATTERN = r"^(\d+(\.\d+)?(ms|s|m|h|d|w))+$|^\d+(\.\d+)?$|^\d{4}-\d{2}-\d{2}([T ][0-9:.]+)?(Z|[+-]\d{2}:?\d{2})?$"


def _answer(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema or _ERROR}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "Bad request",
        401: "Missing or invalid credentials",
        404: "Not found",
        413: "Body too large",
        415: "Not JSON",
        431: "Request headers too large",
        422: "Schema violation",
        503: "Unavailable; see Retry-After",
    }
    return {str(c): _answer(text[c]) for c in codes}


def openapi_document(webhook_path: str) -> dict[str, Any]:
    delivery = {
        "type": "object",
        "required": [
            "id",
            "recipientType",
            "recipient",
            "channel",
            "state",
            "attempts",
            "lastError",
            "createdAt",
            "updatedAt",
        ],
        "properties": {
            "id": {"type": "string"},
            "eventId": {"type": "string"},
            "kind": {"type": "string"},
            "recipientType": {"type": ["string", "null"]},
            "recipient": {"type": ["string", "null"]},
            "channel": {"type": "string"},
            # The route that planned the delivery: its name, `routes[i]`, or `default`.
            "route": {"type": ["string", "null"]},
            "state": {"type": "string", "enum": ["queued", "retrying", "delivered", "failed", "skipped"]},
            "attempts": {"type": "integer"},
            "lastError": {"type": ["string", "null"]},
            "createdAt": {"type": "string", "format": "date-time"},
            "updatedAt": {"type": "string", "format": "date-time"},
        },
    }
    notification = {
        "type": "object",
        "required": ["kind", "sender", "body", "messages", "metadata"],
        "properties": {
            "kind": {"type": "string", "minLength": 1},
            "sender": {"type": "string"},
            "body": {"type": "object"},
            "messages": {"type": "array", "items": {"$ref": "#/components/schemas/Message"}},
            "metadata": {
                "type": "object",
                "required": ["eventId"],
                "properties": {"eventId": {"type": "string", "minLength": 1}, "createdAt": {"type": "string"}},
            },
        },
    }
    message = {
        "type": "object",
        "properties": {
            "recipientType": {"type": ["string", "null"]},
            "recipientType_v2": {"type": ["string", "null"]},
            "recipients": {"type": "array", "items": {"type": "object"}},
            "title": {"type": ["string", "null"]},
            "message": {"type": ["string", "null"]},
        },
    }
    error = {
        "type": "object",
        "required": ["errors", "userMessage", "moreInfo"],
        "properties": {
            "errors": {"type": "array", "items": {"type": "string"}},
            "userMessage": {"type": "string"},
            "inputErrorField": {"type": "string"},
            "moreInfo": {
                "type": "object",
                "properties": {
                    "problems": {"type": "array", "items": {"type": "string"}},
                    "solutions": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    }
    admin: list[dict[str, list[str]]] = [{"adminToken": []}]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "relay",
            "version": __version__,
            "description": "Webhook notification relay: intake, delivery records and replay.",
        },
        "paths": {
            webhook_path: {
                "post": {
                    "summary": "Receive one notification",
                    "security": [{"webhookToken": []}, {"webhookBasic": []}, {}],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Notification"}}},
                    },
                    "responses": {
                        "202": _answer(
                            "Accepted (durable) or duplicate",
                            {
                                "type": "object",
                                "required": ["eventId", "status"],
                                "properties": {
                                    "eventId": {"type": "string"},
                                    "status": {"type": "string", "enum": ["accepted", "duplicate"]},
                                },
                            },
                        ),
                        **_errors(400, 401, 413, 415, 422, 431, 503),
                    },
                }
            },
            "/healthz": {"get": {"summary": "Liveness", "responses": {"200": {"description": "Alive"}}}},
            "/readyz": {
                "get": {
                    "summary": "Redis reachable and a worker seen in the last 30 s",
                    "responses": {"200": {"description": "Ready"}, **_errors(503)},
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "responses": {
                        "200": {"description": "Text format", "content": {"text/plain": {"schema": {"type": "string"}}}}
                    },
                }
            },
            "/api/v1/events/{eventId}": {
                "get": {
                    "summary": "What happened to one notification",
                    "security": admin,
                    "parameters": [{"name": "eventId", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "responses": {
                        "200": _answer(
                            "The notification and its deliveries",
                            {
                                "type": "object",
                                "required": ["eventId", "kind", "receivedAt", "deliveries"],
                                "properties": {
                                    "eventId": {"type": "string"},
                                    "kind": {"type": "string"},
                                    "receivedAt": {"type": "string", "format": "date-time"},
                                    "deliveries": {"type": "array", "items": delivery},
                                },
                            },
                        ),
                        **_errors(401, 404),
                    },
                }
            },
            "/api/v1/deliveries": {
                "get": {
                    "summary": "Deliveries, newest first",
                    "security": admin,
                    "parameters": [
                        {
                            "name": "state",
                            "in": "query",
                            "schema": {
                                "type": "string",
                                "enum": ["queued", "retrying", "delivered", "failed", "skipped"],
                            },
                        },
                        {"name": "kind", "in": "query", "schema": {"type": "string"}},
                        {"name": "channel", "in": "query", "schema": {"type": "string"}},
                        {"name": "since", "in": "query", "schema": {"type": "string", "pattern": SINCE_PATTERN}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "default": 50}},
                    ],
                    "responses": {
                        "200": _answer(
                            "Deliveries, newest first, each with its eventId and kind",
                            {"type": "array", "items": delivery},
                        ),
                        **_errors(401, 422),
                    },
                }
            },
            "/api/v1/reload": {
                "post": {
                    "summary": "Read the config file again (routes, channels, templates, tokens); workers follow",
                    "security": admin,
                    "responses": {
                        "200": _answer(
                            "Reloaded",
                            {
                                "type": "object",
                                "properties": {
                                    "reloaded": {"type": "boolean"},
                                    "generation": {"type": "integer"},
                                    "notes": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                        ),
                        **_errors(401, 422),
                    },
                }
            },
            "/api/v1/deliveries/replay": {
                "post": {
                    "summary": "Requeue failed deliveries (never a delivered one)",
                    "security": admin,
                    "requestBody": {
                        "required": False,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "ids": {"type": "array", "items": {"type": "string"}},
                                        "eventId": {"type": "string"},
                                        "kind": {"type": "string"},
                                        "channel": {"type": "string"},
                                        "since": {"type": "string"},
                                        "dryRun": {"type": "boolean"},
                                    },
                                }
                            }
                        },
                    },
                    "responses": {
                        "200": _answer(
                            "How many were requeued",
                            {
                                "type": "object",
                                "required": ["replayed"],
                                "properties": {"replayed": {"type": "integer"}},
                            },
                        ),
                        **_errors(400, 401, 422),
                    },
                }
            },
        },
        "components": {
            "schemas": {"Notification": notification, "Message": message, "Delivery": delivery, "Error": error},
            "securitySchemes": {
                "webhookToken": {"type": "http", "scheme": "bearer"},
                "webhookBasic": {"type": "http", "scheme": "basic"},
                "adminToken": {"type": "http", "scheme": "bearer"},
            },
        },
    }
