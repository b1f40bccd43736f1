"""The title and body of one delivery: its planned form rebuilt from the record, rendered in the channel's
format (`relay.core.rendering`); a template that failed is counted and logged, and the platform's text used."""

from __future__ import annotations

import logging

from relay.core.model import Notification, PlannedDelivery
from relay.core.rendering import Rendered
from relay.delivery.context import Context
from relay.storage.store import DeliveryRecord

log = logging.getLogger("relay.delivery.jobs")


def planned_of(record: DeliveryRecord, notification: Notification) -> PlannedDelivery:
    message = notification.messages[record.messageIndex]
    recipient = None
    if record.recipientIndex is not None and record.recipientIndex < len(message.recipients):
        recipient = message.recipients[record.recipientIndex]
    return PlannedDelivery(
        message_index=record.messageIndex,
        recipient_type=record.recipientType,
        channel=record.channel,
        template=record.template,
        recipient=recipient,
        recipient_ref=record.recipient,
        address=record.address,
        recipient_index=record.recipientIndex,
    )


def compose(rt: Context, record: DeliveryRecord, notification: Notification, fmt: str) -> Rendered:
    """The delivery rendered as it goes out, with the route's template choice (`record.template`) as every
    attempt renders it; the file it used is noted in `record.templateUsed`, never in the choice."""
    rendered = rt.renderer.render(notification, planned_of(record, notification), fmt)
    if rendered.error:
        rt.store.incr("relay_template_fallbacks_total", kind=record.kind)
        log.warning(
            "template failed, sent the platform's text instead: %s",
            rendered.error,
            extra={"eventId": record.eventId, "deliveryId": record.id, "template": rendered.template},
        )
    record.templateUsed = rendered.template  # as `relay preview` names it
    return rendered
