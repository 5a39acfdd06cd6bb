"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) over the users' entity configs
(``mq.server.scram_credentials``), answered as Kafka's ZooKeeper-mode brokers answer them.

Describe: no users (null or empty) lists every user holding a credential, by name; named users are answered once
each in request order: an empty name is RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE, a user without
a credential RESOURCE_NOT_FOUND. A user's credentials are listed as (mechanism type, iterations) in Kafka's
mechanism order.

Alter: each user is judged as a whole. First the users with an illegal entry (empty name: UNACCEPTABLE_CREDENTIAL;
unknown mechanism: UNSUPPORTED_SASL_MECHANISM; iterations out of 4096..16384: UNACCEPTABLE_CREDENTIAL; mq also
refuses a salt under 12 bytes, which its SCRAM exchange cannot use), then users naming one (user, mechanism) twice
(DUPLICATE_RESOURCE), then users deleting a credential they lack (RESOURCE_NOT_FOUND); every other user's deletions
and upsertions are applied to its entity config and written at once, with a change notification. An upsertion's
salted password becomes the stored and server keys; it is never stored or logged.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from mq.errors import ErrorCode, error_code_of
from mq.protocol.api_keys import ApiKey
from mq.security.scram import MECHANISMS, MIN_SALT_BYTES, ScramCredential, iterations_error, mechanism_of_type
from mq.server.admin_audit import audit
from mq.server.api_dispatch import Api, RequestContext
from mq.server.scram_credentials import (
    read_all_user_configs,
    read_user_config,
    scram_configs,
    write_user_config,
)
from mq.zk.kafka_zk_client import KafkaZkClient

log = logging.getLogger(__name__)

EMPTY_USER = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"


def _result(user: str, code: ErrorCode = ErrorCode.NONE, message: str | None = None) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


def _described(user: str, config: dict[str, str], explicit: bool) -> dict[str, Any] | None:
    """The result for one user's config; None for a user without credentials that was not named."""
    stored = scram_configs(config)
    if not stored:
        if not explicit:
            return None
        return _result(
            user, ErrorCode.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {user}"
        )
    infos = []
    for name, text in stored.items():
        try:
            iterations = ScramCredential.from_string(text).iterations
        except ValueError:
            return _result(
                user,
                ErrorCode.UNKNOWN_SERVER_ERROR,
                "Error processing describe user SCRAM credential configs request",
            )
        infos.append({"mechanism": MECHANISMS[name].type, "iterations": iterations})
    return {**_result(user), "credential_infos": infos}


def describe_credentials(zk: KafkaZkClient, names: Sequence[str] | None) -> list[dict[str, Any]]:
    """The results of a DescribeUserScramCredentials request naming ``names`` (None or empty: every user)."""
    if not names:
        everyone = sorted(read_all_user_configs(zk).items())
        return [r for user, config in everyone if (r := _described(user, config, explicit=False)) is not None]
    counts = Counter(names)
    results = []
    for user in dict.fromkeys(names):
        if user == "":
            results.append(_result(user, ErrorCode.RESOURCE_NOT_FOUND, EMPTY_USER))
        elif counts[user] > 1:
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            results.append(_result(user, ErrorCode.DUPLICATE_RESOURCE, message))
        else:
            described = _described(user, read_user_config(zk, user), explicit=True)
            assert described is not None
            results.append(described)
    return results


def _refusal(upsertion: Any) -> tuple[ErrorCode, str] | None:
    """Why an upsertion is illegal on its own, or None."""
    if upsertion.name == "":
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, EMPTY_USER
    mechanism = mechanism_of_type(upsertion.mechanism)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM
    bad_iterations = iterations_error(mechanism, upsertion.iterations)
    if bad_iterations is not None:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, bad_iterations
    if len(upsertion.salt) < MIN_SALT_BYTES:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Salt must be at least {MIN_SALT_BYTES} bytes"
    return None


def alter_credentials(
    zk: KafkaZkClient, upsertions: Sequence[Any], deletions: Sequence[Any]
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """The results of an AlterUserScramCredentials request (one per user) and, per user altered, what changed
    (for the audit log: mechanism names and iterations only)."""
    results: list[dict[str, Any]] = []
    illegal: dict[str, tuple[ErrorCode, str]] = {}
    for deletion in deletions:
        if deletion.name == "":
            illegal[""] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, EMPTY_USER)
        elif mechanism_of_type(deletion.mechanism) is None:
            illegal[deletion.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
    for upsertion in upsertions:
        refusal = _refusal(upsertion)
        if refusal is not None:
            illegal[upsertion.name] = refusal
    results += [_alter_result(user, code, message) for user, (code, message) in illegal.items()]

    pairs = [(e.name, int(e.mechanism)) for e in [*upsertions, *deletions] if e.name not in illegal]
    duplicated = list(dict.fromkeys(user for (user, _), count in Counter(pairs).items() if count > 1))
    results += [
        _alter_result(
            user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
        )
        for user in duplicated
    ]
    users = [user for user in dict.fromkeys(user for user, _ in pairs) if user not in duplicated]
    configs = {user: read_user_config(zk, user) for user in users}

    missing = list(
        dict.fromkeys(d.name for d in deletions if d.name in configs and _name(d.mechanism) not in configs[d.name])
    )
    results += [
        _alter_result(user, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        for user in missing
    ]
    changes: dict[str, list[str]] = {}
    for user in users:
        if user in missing:
            continue
        config = configs[user]
        changed = changes[user] = []
        for deletion in (d for d in deletions if d.name == user):
            config.pop(_name(deletion.mechanism))
            changed.append(f"deleted {_name(deletion.mechanism)}")
        for upsertion in (u for u in upsertions if u.name == user):
            mechanism = mechanism_of_type(upsertion.mechanism)
            assert mechanism is not None
            credential = ScramCredential.from_salted_password(
                mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
            )
            config[mechanism.name] = credential.to_string()
            changed.append(f"set {mechanism.name} (iterations={upsertion.iterations})")
    failed: list[dict[str, Any]] = []
    for user in changes:
        try:
            write_user_config(zk, user, configs[user])
        except Exception as exc:
            log.warning("SCRAM credentials of user %s not written: %s", user, exc)
            failed.append(_alter_result(user, error_code_of(exc), "Error persisting user SCRAM credentials"))
    failed_users = {f["user"] for f in failed}
    results += failed
    results += [_alter_result(user) for user in changes if user not in failed_users]
    return results, {user: changed for user, changed in changes.items() if user not in failed_users}


def _name(wire_type: int) -> str:
    mechanism = mechanism_of_type(wire_type)
    assert mechanism is not None
    return mechanism.name


def _alter_result(user: str, code: ErrorCode = ErrorCode.NONE, message: str | None = None) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message}


def user_scram_credential_apis(zk: KafkaZkClient) -> list[Api]:
    """Both APIs over ``zk``; alterations made through this broker are applied one at a time (each reads and
    rewrites whole user nodes)."""
    altering = threading.Lock()

    async def describe(context: RequestContext, request: Any) -> dict[str, Any]:
        names = None if request.users is None else [u.name for u in request.users]
        results = await asyncio.to_thread(describe_credentials, zk, names)
        return {"throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}

    def describe_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": None, "results": []}

    def alter_locked(
        upsertions: Sequence[Any], deletions: Sequence[Any]
    ) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
        with altering:
            return alter_credentials(zk, upsertions, deletions)

    async def alter(context: RequestContext, request: Any) -> dict[str, Any]:
        results, changes = await asyncio.to_thread(alter_locked, request.upsertions, request.deletions)
        for user, changed in changes.items():
            audit(context, f"altered SCRAM credentials of user {user}: {', '.join(changed)}")
        return {"throttle_time": 0, "results": results}

    def alter_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        users = dict.fromkeys(e.name for e in [*request.upsertions, *request.deletions])
        return {"throttle_time": 0, "results": [_alter_result(user, code) for user in users]}

    return [
        Api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, describe, describe_error),
        Api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, alter, alter_error),
    ]
