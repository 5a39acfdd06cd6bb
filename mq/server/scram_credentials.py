"""Users' SCRAM credentials: stored as Kafka stores them, and cached by every broker for its SASL exchanges.

Store: the user's entity config ``/config/users/<sanitized user>`` (the node that also holds the user's quotas, whose
keys are left alone), ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,
iterations=4096", ...}}``, one key per mechanism. Every write adds the ``/config/changes`` notification
``users/<sanitized user>``, through which every broker reads that user's node again.

Cache: user -> mechanism -> credential, loaded at start-up and replaced user by user on notifications. The metadata
thread reads the tree; ``update`` and ``lookup`` run on the loop, which owns the cache (``lookup`` is what a SASL
exchange calls). A stored value that is not a credential is logged and left out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mq.security.scram import MECHANISMS, CredentialLookup, ScramCredential
from mq.server.quotas import DEFAULT, desanitize, sanitize
from mq.zk import paths
from mq.zk.codecs import decode_entity_config
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import NoNodeError

log = logging.getLogger(__name__)

UserCredentials = dict[str, ScramCredential]
"""mechanism name -> credential, for one user."""


def scram_configs(config: Mapping[str, str]) -> dict[str, str]:
    """The SCRAM keys of an entity config, in Kafka's mechanism order."""
    return {name: config[name] for name in MECHANISMS if name in config}


def read_user_config(zk: KafkaZkClient, user: str | None) -> dict[str, str]:
    """The entity config of ``user`` (None: the default user), every key; {} when the node is absent or was created
    without data."""
    data = zk.store.get_or_none(paths.entity_config("users", DEFAULT if user is None else sanitize(user)))
    return decode_entity_config(data) if data else {}


def read_all_user_configs(zk: KafkaZkClient) -> dict[str, dict[str, str]]:
    """Every user (desanitized name, the default entity included) that has an entity config, with that config."""
    try:
        children = zk.store.get_children(paths.CONFIG_USERS)
    except NoNodeError:
        return {}
    found = {}
    for child in children:
        data = zk.store.get_or_none(f"{paths.CONFIG_USERS}/{child}")
        if data:
            found[desanitize(child)] = decode_entity_config(data)
    return found


def write_user_config(zk: KafkaZkClient, user: str, config: Mapping[str, str]) -> None:
    """Replace the entity config of ``user`` and notify every broker."""
    zk.set_entity_config("users", sanitize(user), dict(config))


def parse_credentials(user: str, config: Mapping[str, str]) -> UserCredentials:
    """The credentials in a user's entity config; a value that does not parse is logged (never shown) and skipped."""
    credentials = {}
    for mechanism, text in scram_configs(config).items():
        try:
            credentials[mechanism] = ScramCredential.from_string(text)
        except ValueError as exc:
            log.warning("ignoring the %s credential of user %s: %s", mechanism, user, exc)
    return credentials


def read_user_credentials(zk: KafkaZkClient, user: str) -> UserCredentials:
    return parse_credentials(user, read_user_config(zk, user))


def read_all_credentials(zk: KafkaZkClient) -> dict[str, UserCredentials]:
    """Every user holding a credential (not the default entity, which names no user)."""
    found = {}
    for user, config in read_all_user_configs(zk).items():
        credentials = parse_credentials(user, config) if user != DEFAULT else {}
        if credentials:
            found[user] = credentials
    return found


class ScramCredentialCache:
    """The broker's view of every user's credentials; owned by the loop."""

    def __init__(self) -> None:
        self._users: dict[str, UserCredentials] = {}

    def update(self, user: str, credentials: Mapping[str, ScramCredential]) -> None:
        """Replace what is known of ``user`` (no credentials: forget the user)."""
        if credentials and user != DEFAULT:
            self._users[user] = dict(credentials)
        else:
            self._users.pop(user, None)

    def lookup(self, mechanism: str, username: str) -> ScramCredential | None:
        credentials = self._users.get(username)
        return None if credentials is None else credentials.get(mechanism)

    def for_mechanism(self, mechanism: str) -> CredentialLookup:
        """The ``lookup`` of one mechanism, as ``ScramServer`` takes it."""
        return lambda username: self.lookup(mechanism, username)
