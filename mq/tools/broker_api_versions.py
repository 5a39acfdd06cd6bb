"""``mq broker-api-versions``: Kafka's BrokerApiVersionsCommand (kafka-broker-api-versions.sh).

Per broker of the cluster (by id), Kafka's ``NodeApiVersions.toString(true)`` after the node::

    127.0.0.1:9092 (id: 0 rack: null) -> (
    \tProduce(0): 0 to 11 [usable: 9],
    \t...
    \tConsumerGroupDescribe(69): UNSUPPORTED
    )

Each API the broker advertises is ``Name(key): min to max`` (``min`` alone when equal) followed by what this tool's
client could use: ``[usable: v]`` (the highest version both sides support), ``[unusable: node too new]`` (the
broker's oldest version is newer than the client's newest) or ``[unusable: node too old]``; an API the client knows
and the broker does not advertise is ``UNSUPPORTED``; an API key the client has never heard of is ``UNKNOWN(key)``.
The client's range per API is mq's own client's (``client_versions``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mq.client.cluster import BrokerMetadata
from mq.client.connection import client_versions
from mq.protocol.api_keys import ApiKey

ClientRange = Callable[[int], tuple[int, int] | None]


def api_name(key: ApiKey) -> str:
    """Kafka's ``ApiKeys`` name: ``LEADER_AND_ISR`` -> ``LeaderAndIsr``."""
    return "".join(word.capitalize() for word in key.name.split("_"))


def node_text(broker: BrokerMetadata) -> str:
    """Kafka's ``Node.toString``."""
    return f"{broker.host}:{broker.port} (id: {broker.node_id} rack: {broker.rack if broker.rack else 'null'})"


def api_text(key: int, versions: tuple[int, int], client: ClientRange = client_versions) -> str:
    low, high = versions
    span = str(low) if low == high else f"{low} to {high}"
    if key not in ApiKey._value2member_map_:
        return f"UNKNOWN({key}): {span}"
    text = f"{api_name(ApiKey(key))}({key}): {span}"
    ours = client(key)
    if ours is None:
        return text
    if ours[1] < low:
        return f"{text} [unusable: node too new]"
    if high < ours[0]:
        return f"{text} [unusable: node too old]"
    return f"{text} [usable: {min(ours[1], high)}]"


def node_api_versions_lines(
    broker: BrokerMetadata, advertised: Mapping[int, tuple[int, int]], client: ClientRange = client_versions
) -> list[str]:
    """The lines printed for one broker: every API it advertises and every API the client knows, by key."""
    texts = {key: api_text(key, versions, client) for key, versions in advertised.items()}
    for key in ApiKey:
        if key not in texts and client(key) is not None:
            texts[key] = f"{api_name(key)}({int(key)}): UNSUPPORTED"
    entries = [texts[key] for key in sorted(texts)]
    return [f"{node_text(broker)} -> (", *(f"\t{entry}," for entry in entries[:-1]), f"\t{entries[-1]}", ")"]


def error_line(broker: BrokerMetadata, error: Exception) -> str:
    return f"{node_text(broker)} -> ERROR: {error}"
