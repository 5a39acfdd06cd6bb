"""kafka-configs for users' SCRAM credentials: the ``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` keys of
``--entity-type users``.

A credential to add is written ``SCRAM-SHA-256=[iterations=8192,password=alice-secret]`` (``iterations`` optional,
4096 by default, -1 meaning the default; from 4096 to 16384). Through the admin APIs (``--bootstrap-server``) the
tool salts the password itself and sends the salt and salted password with AlterUserScramCredentials, as Kafka 3's
kafka-configs does: SCRAM keys are refused for the default user and cannot be altered together with quota keys; a
user's credentials are described with DescribeUserScramCredentials, after its quotas, as ``SCRAM credential configs
for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096``. Through the metadata
tree (``--zookeeper``, as Kafka 2's) the credential is computed here and written to ``/config/users/<user>`` with a
change notification (only SCRAM keys can be changed that way), and describing prints the node's configs as they are
stored (every user, by name, when none is named). Passwords and salted passwords never reach an output line or an
error message. Failures raise ``ConfigCommandError``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from mq.client.admin import AsyncAdmin, ScramUpsertion
from mq.client.sync import SyncAdmin
from mq.errors import ErrorCode, KafkaError
from mq.security.scram import (
    DEFAULT_ITERATIONS,
    MECHANISMS,
    ScramCredential,
    ScramMechanism,
    new_salt,
    salted_password,
)
from mq.server.quotas import DEFAULT, QUOTA_KEYS
from mq.server.scram_credentials import read_all_user_configs, read_user_config, write_user_config
from mq.tools.configs import ConfigCommandError
from mq.tools.kafka_exceptions import exception_class
from mq.zk.kafka_zk_client import KafkaZkClient

_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def has_scram_keys(add: Mapping[str, str], delete: Sequence[str]) -> bool:
    return any(key in MECHANISMS for key in [*add, *delete])


def parse_credential(mechanism: ScramMechanism, value: str) -> tuple[int, str]:
    """(iterations, password) of ``[iterations=<n>,]password=<password>``, with Kafka's bounds."""
    match = _CREDENTIAL.fullmatch(value)
    if match is None:
        raise ConfigCommandError(
            f"Invalid credential property {mechanism.name}: expected [iterations=<n>,]password=<password>"
        )
    text, password = match.groups()
    if text == "":
        raise ConfigCommandError(f"Invalid credential property {mechanism.name}: iterations must be a number")
    if not password:
        raise ConfigCommandError(f"Invalid credential property {mechanism.name}: the password must not be empty")
    iterations = DEFAULT_ITERATIONS if text is None or text == "-1" else int(text)
    if iterations < mechanism.min_iterations:
        raise ConfigCommandError(
            f"Iterations {iterations} is less than the minimum {mechanism.min_iterations} required for {mechanism.name}"
        )
    if iterations > mechanism.max_iterations:
        raise ConfigCommandError(
            f"Iterations {iterations} is more than the maximum {mechanism.max_iterations} allowed for {mechanism.name}"
        )
    return iterations, password


def _refuse_default(default: bool, how: str) -> None:
    if default:
        raise ConfigCommandError(
            f"The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials{how}."
        )


def alter_user_credentials(
    admin: SyncAdmin, user: str | None, default: bool, add: Mapping[str, str], delete: Sequence[str]
) -> list[str]:
    """Kafka's checks of a users alteration holding SCRAM keys, then AlterUserScramCredentials."""
    unknown_added = [k for k in add if k not in MECHANISMS and k not in QUOTA_KEYS]
    if unknown_added:
        raise ConfigCommandError(
            "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. "
            f"Unexpected config names: {','.join(unknown_added)}"
        )
    unknown_deleted = [k for k in delete if k not in MECHANISMS and k not in QUOTA_KEYS]
    if unknown_deleted:
        raise ConfigCommandError(
            "Only quota and SCRAM credential configs can be deleted for 'users' using --bootstrap-server. "
            f"Unexpected config names: {','.join(unknown_deleted)}"
        )
    _refuse_default(default, " using --bootstrap-server")
    if any(k in QUOTA_KEYS for k in [*add, *delete]):
        raise ConfigCommandError(
            "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server."
        )
    assert user is not None
    upsertions = []
    for name, value in add.items():
        mechanism = MECHANISMS[name]
        iterations, password = parse_credential(mechanism, value)
        salt = new_salt()
        upsertions.append(
            ScramUpsertion(user, mechanism, iterations, salt, salted_password(mechanism, password, salt, iterations))
        )
    deletions = [(user, MECHANISMS[name]) for name in delete]
    try:
        admin.call(AsyncAdmin.alter_user_scram_credentials, upsertions, deletions)
    except KafkaError as exc:
        raise ConfigCommandError(str(exc)) from None
    return [f"Completed updating config for user {user}."]


def describe_user_credentials(admin: SyncAdmin, user: str | None) -> list[str]:
    """Kafka's lines for the credentials of ``user`` (None: every user holding one); a user without credentials
    prints nothing."""
    try:
        described = admin.call(AsyncAdmin.describe_user_scram_credentials, [] if user is None else [user])
    except KafkaError as exc:
        raise ConfigCommandError(str(exc)) from None
    lines = []
    for one in described:
        if one.error == ErrorCode.RESOURCE_NOT_FOUND:
            continue
        if one.error != ErrorCode.NONE:
            lines.append(
                f"Error retrieving SCRAM credential configs for user-principal '{one.user}': "
                f"{exception_class(one.error).rsplit('.', 1)[-1]}: {one.message or one.error.name}"
            )
            continue
        text = ", ".join(f"{mechanism}=iterations={iterations}" for mechanism, iterations in one.credentials)
        lines.append(f"SCRAM credential configs for user-principal '{one.user}' are {text}")
    return lines


def alter_user_credentials_zk(
    zk: KafkaZkClient, user: str | None, default: bool, add: Mapping[str, str], delete: Sequence[str]
) -> list[str]:
    """Kafka 2's ``--zookeeper`` alteration of a user: compute the credentials here, write the user's node."""
    others = [k for k in [*add, *delete] if k not in MECHANISMS]
    if others:
        raise ConfigCommandError(
            f"--bootstrap-server option must be specified to update users configs: {{add: [{', '.join(add)}], "
            f"delete: [{', '.join(delete)}]}}. User configuration updates using ZooKeeper are only supported for SCRAM "
            "credential updates."
        )
    _refuse_default(default, "")
    assert user is not None
    credentials = {}
    for name, value in add.items():
        mechanism = MECHANISMS[name]
        iterations, password = parse_credential(mechanism, value)
        credentials[name] = ScramCredential.from_password(mechanism, password, iterations).to_string()
    config = read_user_config(zk, user)
    missing = [key for key in delete if key not in config]
    if missing:
        raise ConfigCommandError(f"Invalid config(s): {','.join(missing)}")
    config.update(credentials)
    for key in delete:
        config.pop(key)
    write_user_config(zk, user, config)
    return [f"Completed updating config for entity: user-principal '{user}'."]


def describe_users_zk(zk: KafkaZkClient, user: str | None, default: bool) -> list[str]:
    """Kafka 2's ``Configs for user-principal 'alice' are k=v,...`` of the stored node (every user with a config
    when none is named)."""
    configs: dict[str | None, dict[str, str]]
    if default or user is not None:
        configs = {None if default else user: read_user_config(zk, None if default else user)}
    else:
        configs = {name: config for name, config in sorted(read_all_user_configs(zk).items()) if config}
    lines = []
    for name, config in configs.items():
        label = "default user-principal" if name in (None, DEFAULT) else f"user-principal '{name}'"
        lines.append(f"Configs for {label} are {','.join(f'{k}={v}' for k, v in config.items())}")
    return lines
