"""What dq and dq.asyncio share: the DQ.* grammar (argument checks, reply
parsing, errors), the sharded-queue arithmetic and the Worker's decisions,
written once; dq/ and dq/asyncio/ bind them to a blocking or an asyncio
client. No I/O here."""

from .errors import (
    DqError, EventGap, EventLogRestarted, OutOfMemory, Permanent, Retry, StaleDelivery, UnknownMessage, WrongType,
)
from .records import Delivery, Entry, Event, Group, JobOutcome, Outcome, Schedule

# The public names dq and dq.asyncio both export.
__all__ = [
    "Delivery",
    "DqError",
    "Entry",
    "Event",
    "EventGap",
    "EventLogRestarted",
    "Group",
    "JobOutcome",
    "OutOfMemory",
    "Outcome",
    "Permanent",
    "Retry",
    "Schedule",
    "StaleDelivery",
    "UnknownMessage",
    "WrongType",
]
