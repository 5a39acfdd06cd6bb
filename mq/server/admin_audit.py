"""``kafka.admin``: one INFO line per admin change a client made, with who made it.

``Admin change by <principal> (clientId=<id>, address=<host>:<port>) with <Api>: <what changed>`` — topic
create/delete, partition add, config change (broker loggers included), DeleteRecords, OffsetDelete, group deletion,
reassignment, leader election, client quota change, SCRAM credential change (mechanism and iterations, never a
secret), replica log dir moves, and offset resets (OffsetCommits outside any generation: the first per connection and
group). Validate-only requests and refused changes are not logged. The logging config sends these lines to
server.log.
"""

from __future__ import annotations

import logging

from mq.protocol.api_keys import request_name
from mq.server.api_dispatch import RequestContext

admin_log = logging.getLogger("kafka.admin")


def audit(context: RequestContext, change: str) -> None:
    """Log ``change`` (e.g. ``created topic t with 3 partitions``) as made by the client of ``context``."""
    client = context.client
    admin_log.info(
        "Admin change by %s (clientId=%s, address=%s:%d) with %s: %s",
        client.principal,
        context.header.client_id or "",
        client.host,
        client.port,
        request_name(context.header.api_key),
        change,
    )
