"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v0 to v3, answered as Kafka's ZooKeeper-era brokers do.

Without an authorizer (``authorizer.class.name`` empty) every request answers SECURITY_DISABLED. With one, the
caller needs DESCRIBE (DescribeAcls) or ALTER (CreateAcls, DeleteAcls) on the CLUSTER resource, which the dispatcher
checks (``mq.server.authorization.CLUSTER_OPERATIONS``), else CLUSTER_AUTHORIZATION_FAILED for everything it asked.
A v0 filter or binding is LITERAL (v0 has no pattern type).

- DescribeAcls: the bindings the filter matches, grouped by pattern; a filter with an UNKNOWN element (a code Kafka
  does not define) answers INVALID_REQUEST.
- CreateAcls: each binding that cannot be stored answers INVALID_REQUEST with the reason (``binding_error``: ANY,
  MATCH or UNKNOWN anywhere, an empty name, a CLUSTER name other than ``kafka-cluster``, ...); the others are
  written, one write per pattern, and each is audited.
- DeleteAcls: each filter answers the bindings it removed (a binding two filters match is reported by the first);
  a filter with an UNKNOWN element answers INVALID_REQUEST and removes nothing.
"""

from __future__ import annotations

from typing import Any

from mq.errors import ErrorCode
from mq.protocol.acls import binding_fields, binding_of, entry_fields, filter_of
from mq.protocol.api_keys import ApiKey
from mq.security.acl import binding_error, group_by_pattern
from mq.server.acl_cache import AclCache
from mq.server.admin_audit import audit
from mq.server.api_dispatch import Api, RequestContext

NO_AUTHORIZER = "No Authorizer is configured."


def acl_apis(acl: AclCache | None) -> list[Api]:
    """The three ACL APIs over ``acl`` (None: no authorizer is configured)."""

    def describe_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        message = "No Authorizer is configured on the broker" if code == ErrorCode.SECURITY_DISABLED else None
        return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": []}

    async def describe(context: RequestContext, request: Any) -> dict[str, Any]:
        if acl is None:
            return describe_error(context, request, ErrorCode.SECURITY_DISABLED)
        binding_filter = filter_of(request)
        unknown = binding_filter.unknown_element()
        if unknown is not None:
            return {
                "throttle_time": 0,
                "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": unknown,
                "resources": [],
            }
        resources = [
            {
                "resource_type": int(pattern.resource_type),
                "resource_name": pattern.name,
                "pattern_type": int(pattern.pattern_type),
                "acls": [entry_fields(e) for e in entries],
            }
            for pattern, entries in group_by_pattern(acl.authorizer.acls(binding_filter)).items()
        ]
        return {"throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None, "resources": resources}

    def create_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        message = NO_AUTHORIZER if code == ErrorCode.SECURITY_DISABLED else None
        return {
            "throttle_time": 0,
            "results": [{"error_code": code, "error_message": message} for _ in request.creations],
        }

    async def create(context: RequestContext, request: Any) -> dict[str, Any]:
        if acl is None:
            return create_error(context, request, ErrorCode.SECURITY_DISABLED)
        bindings = [binding_of(c, c, "resource_pattern_type") for c in request.creations]
        results: list[dict[str, Any]] = []
        valid = []
        for binding in bindings:
            error = binding_error(binding)
            if error is None:
                valid.append(binding)
                results.append({"error_code": ErrorCode.NONE, "error_message": None})
            else:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": error})
        outcome = await acl.create_acls(valid) if valid else {}
        for binding, result in zip(bindings, results, strict=True):
            if result["error_code"] != ErrorCode.NONE:
                continue
            written = outcome[binding.pattern]
            if isinstance(written, Exception):
                result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(written))
            else:
                audit(context, f"added ACL {binding.entry} to {binding.pattern}")
        return {"throttle_time": 0, "results": results}

    def delete_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        message = NO_AUTHORIZER if code == ErrorCode.SECURITY_DISABLED else None
        return {
            "throttle_time": 0,
            "filter_results": [
                {"error_code": code, "error_message": message, "matching_acls": []} for _ in request.filters
            ],
        }

    async def delete(context: RequestContext, request: Any) -> dict[str, Any]:
        if acl is None:
            return delete_error(context, request, ErrorCode.SECURITY_DISABLED)
        filters = [filter_of(f) for f in request.filters]
        unknown = [f.unknown_element() for f in filters]
        valid = [f for f, why in zip(filters, unknown, strict=True) if why is None]
        deleted = iter(await acl.delete_acls(valid) if valid else [])
        filter_results = []
        for why in unknown:
            if why is not None:
                filter_results.append(
                    {"error_code": ErrorCode.INVALID_REQUEST, "error_message": why, "matching_acls": []}
                )
                continue
            matching = []
            for binding, failure in next(deleted):
                error: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None}
                if failure is not None:
                    error = {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(failure)}
                else:
                    audit(context, f"removed ACL {binding.entry} from {binding.pattern}")
                matching.append({**error, **binding_fields(binding)})
            filter_results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": matching})
        return {"throttle_time": 0, "filter_results": filter_results}

    return [
        Api(ApiKey.DESCRIBE_ACLS, 0, 3, describe, describe_error),
        Api(ApiKey.CREATE_ACLS, 0, 3, create, create_error),
        Api(ApiKey.DELETE_ACLS, 0, 3, delete, delete_error),
    ]
