"""JSON codecs of the metadata tree's znodes, as Kafka 2.8 writes them; readers accept every older version.

All znode data is compact UTF-8 JSON; parsers ignore key order and unknown keys. Decoders raise ValueError with
the path-independent reason when data is not what the znode should hold.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from typing import Any


def dumps(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def loads(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None


def _object(data: bytes, what: str) -> dict[str, Any]:
    document = loads(data)
    if not isinstance(document, dict):
        raise ValueError(f"{what} must be a JSON object")
    return document


def new_topic_id() -> str:
    """A topic or cluster id: URL-safe base64 of a random UUID, no padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


@dataclass
class TopicAssignment:
    """``/brokers/topics/<topic>``: replicas per partition (first = preferred leader)."""

    partitions: dict[int, list[int]]
    topic_id: str | None = None
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        document: dict[str, Any] = {"version": 3}
        if self.topic_id is not None:
            document["topic_id"] = self.topic_id
        document["partitions"] = {str(p): r for p, r in sorted(self.partitions.items())}
        document["adding_replicas"] = {str(p): r for p, r in sorted(self.adding_replicas.items())}
        document["removing_replicas"] = {str(p): r for p, r in sorted(self.removing_replicas.items())}
        return dumps(document)

    @classmethod
    def decode(cls, data: bytes) -> TopicAssignment:
        document = _object(data, "topic assignment")

        def replicas(key: str) -> dict[int, list[int]]:
            raw = document.get(key) or {}
            return {int(p): [int(b) for b in r] for p, r in raw.items()}

        if "partitions" not in document:
            raise ValueError("topic assignment has no partitions")
        return cls(
            replicas("partitions"), document.get("topic_id"), replicas("adding_replicas"), replicas("removing_replicas")
        )


@dataclass
class PartitionState:
    """``.../partitions/<p>/state``: leader (-1 = none), leader epoch, ISR and the deciding controller's epoch."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int

    def encode(self) -> bytes:
        return dumps(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": self.isr,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> PartitionState:
        d = _object(data, "partition state")
        return cls(int(d["leader"]), int(d["leader_epoch"]), [int(b) for b in d["isr"]], int(d["controller_epoch"]))


@dataclass
class BrokerRegistration:
    """``/brokers/ids/<id>`` (ephemeral), written as version 5."""

    broker_id: int
    endpoints: list[str]
    """Advertised ``LISTENER://host:port`` strings."""
    rack: str | None = None
    timestamp_ms: int = 0
    security_protocol_map: dict[str, str] = field(default_factory=lambda: {"PLAINTEXT": "PLAINTEXT"})

    def addresses(self) -> dict[str, tuple[str, int]]:
        """Listener name -> (host, port) of every endpoint, in registration order."""
        found: dict[str, tuple[str, int]] = {}
        for endpoint in self.endpoints:
            name, _, address = endpoint.partition("://")
            host, _, port = address.rpartition(":")
            found[name] = (host.strip("[]"), int(port))
        return found

    def host_port(self, listener: str | None = None) -> tuple[str, int] | None:
        """Host and port of the endpoint of ``listener``, else of the first endpoint whose listener's security
        protocol is PLAINTEXT (its name mapped by ``security_protocol_map``, else the name itself), if registered."""
        for name, address in self.addresses().items():
            if name == listener if listener is not None else self.security_protocol_map.get(name, name) == "PLAINTEXT":
                return address
        return None

    def encode(self) -> bytes:
        plaintext = self.host_port()
        document: dict[str, Any] = {
            "features": {},
            "listener_security_protocol_map": self.security_protocol_map,
            "endpoints": self.endpoints,
            "jmx_port": -1,
            "host": plaintext[0] if plaintext else None,
            "timestamp": str(self.timestamp_ms),
            "port": plaintext[1] if plaintext else -1,
            "version": 5,
        }
        if self.rack is not None:
            document["rack"] = self.rack
        return dumps(document)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        d = _object(data, "broker registration")
        version = int(d.get("version", 0))
        if version < 1:
            raise ValueError(f"unsupported broker registration version {version}")
        if version == 1:
            endpoints = [f"PLAINTEXT://{d['host']}:{d['port']}"]
        else:
            endpoints = [str(e) for e in d.get("endpoints", [])]
        protocol_map = d.get("listener_security_protocol_map") or {"PLAINTEXT": "PLAINTEXT"}
        return cls(broker_id, endpoints, d.get("rack"), int(d.get("timestamp", 0)), dict(protocol_map))


@dataclass
class ConsumerRegistration:
    """``/consumers/<group>/ids/<consumer id>`` of a ZooKeeper-coordinated consumer (Kafka 0.8): streams per topic
    (``static``) or per regular expression (``white_list``/``black_list``); the timestamp is a string of ms."""

    subscription: dict[str, int]
    pattern: str = "static"
    timestamp_ms: int = 0

    def encode(self) -> bytes:
        return dumps(
            {
                "version": 1,
                "subscription": self.subscription,
                "pattern": self.pattern,
                "timestamp": str(self.timestamp_ms),
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> ConsumerRegistration:
        document = _object(data, "consumer registration")
        subscription = document.get("subscription")
        if not isinstance(subscription, dict):
            raise ValueError("consumer registration needs a subscription object")
        return cls(
            {str(t): int(n) for t, n in subscription.items()},
            str(document.get("pattern", "static")),
            int(document.get("timestamp") or 0),
        )


@dataclass
class ControllerInfo:
    """``/controller`` (ephemeral)."""

    broker_id: int
    timestamp_ms: int

    def encode(self) -> bytes:
        return dumps({"version": 1, "brokerid": self.broker_id, "timestamp": str(self.timestamp_ms)})

    @classmethod
    def decode(cls, data: bytes) -> ControllerInfo:
        d = _object(data, "controller")
        return cls(int(d["brokerid"]), int(d.get("timestamp", 0)))


def encode_entity_config(config: dict[str, str]) -> bytes:
    """``/config/<type>/<name>``: values are always strings."""
    return dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})


def decode_entity_config(data: bytes) -> dict[str, str]:
    d = _object(data, "entity config")
    return {str(k): str(v) for k, v in (d.get("config") or {}).items()}


def encode_config_change(entity_path: str) -> bytes:
    """``/config/changes/config_change_<seq>`` version 2, e.g. entity path ``topics/orders``."""
    return dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    """The entity path (``topics/orders``) of any notification version (0.8 string, v1, v2)."""
    document = loads(data)
    if isinstance(document, str):
        return f"topics/{document}"
    if isinstance(document, dict):
        if "entity_path" in document:
            return str(document["entity_path"])
        if "entity_type" in document and "entity_name" in document:
            return f"{document['entity_type']}/{document['entity_name']}"
    raise ValueError("unrecognised config change notification")


def encode_reassignment(moves: list[tuple[str, int, list[int]]]) -> bytes:
    """``/admin/reassign_partitions``."""
    return dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for t, p, r in moves]})


def decode_reassignment(data: bytes) -> list[tuple[str, int, list[int]]]:
    d = _object(data, "reassignment")
    return [(str(e["topic"]), int(e["partition"]), [int(b) for b in e["replicas"]]) for e in d.get("partitions", [])]


def encode_partition_list(partitions: list[tuple[str, int]]) -> bytes:
    """``/admin/preferred_replica_election`` and ISR change notifications."""
    return dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_partition_list(data: bytes) -> list[tuple[str, int]]:
    d = _object(data, "partition list")
    return [(str(e["topic"]), int(e["partition"])) for e in d.get("partitions", [])]


LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    """``/log_dir_event_notification/log_dir_event_<seq>``: a log dir of ``broker_id`` failed (event 1)."""
    return dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker id of a log dir event."""
    return int(_object(data, "log dir event")["broker"])


def encode_cluster_id(cluster_id: str) -> bytes:
    """``/cluster/id``: note that ``version`` is a string there."""
    return dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_object(data, "cluster id")["id"])
