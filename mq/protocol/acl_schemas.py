"""Version 0 of DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), declared in kio's style (kio starts at v1).

v0 is v1 without the pattern type fields (Kafka 2.0 added them with v1): a v0 filter or binding is LITERAL, and a
v0 response carries no pattern type. Field names are kio's v1 names, so one handler reads every version. (No
postponed annotations here: kio reads the field types at run time.)
"""

from dataclasses import field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i8, i32Timedelta

from mq.protocol.inter_broker import declared_schema

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31


def _int8() -> Any:
    return field(metadata={"kafka_type": "int8"})


def _string() -> Any:
    return field(metadata={"kafka_type": "string"})


def _error() -> Any:
    return field(metadata={"kafka_type": "error_code"})


def _throttle() -> Any:
    return field(metadata={"kafka_type": "timedelta_i32"})


@declared_schema(DESCRIBE_ACLS, 0, EntityType.request, flexible=False)
class DescribeAclsRequest:
    resource_type_filter: i8 = _int8()
    resource_name_filter: str | None = _string()
    principal_filter: str | None = _string()
    host_filter: str | None = _string()
    operation: i8 = _int8()
    permission_type: i8 = _int8()


@declared_schema(DESCRIBE_ACLS, 0, EntityType.nested, flexible=False)
class AclDescription:
    principal: str = _string()
    host: str = _string()
    operation: i8 = _int8()
    permission_type: i8 = _int8()


@declared_schema(DESCRIBE_ACLS, 0, EntityType.nested, flexible=False)
class DescribeAclsResource:
    resource_type: i8 = _int8()
    resource_name: str = _string()
    acls: tuple[AclDescription, ...]


@declared_schema(DESCRIBE_ACLS, 0, EntityType.response, flexible=False)
class DescribeAclsResponse:
    throttle_time: i32Timedelta = _throttle()
    error_code: ErrorCode = _error()
    error_message: str | None = _string()
    resources: tuple[DescribeAclsResource, ...]


@declared_schema(CREATE_ACLS, 0, EntityType.nested, flexible=False)
class AclCreation:
    resource_type: i8 = _int8()
    resource_name: str = _string()
    principal: str = _string()
    host: str = _string()
    operation: i8 = _int8()
    permission_type: i8 = _int8()


@declared_schema(CREATE_ACLS, 0, EntityType.request, flexible=False)
class CreateAclsRequest:
    creations: tuple[AclCreation, ...]


@declared_schema(CREATE_ACLS, 0, EntityType.nested, flexible=False)
class AclCreationResult:
    error_code: ErrorCode = _error()
    error_message: str | None = _string()


@declared_schema(CREATE_ACLS, 0, EntityType.response, flexible=False)
class CreateAclsResponse:
    throttle_time: i32Timedelta = _throttle()
    results: tuple[AclCreationResult, ...]


@declared_schema(DELETE_ACLS, 0, EntityType.nested, flexible=False)
class DeleteAclsFilter:
    resource_type_filter: i8 = _int8()
    resource_name_filter: str | None = _string()
    principal_filter: str | None = _string()
    host_filter: str | None = _string()
    operation: i8 = _int8()
    permission_type: i8 = _int8()


@declared_schema(DELETE_ACLS, 0, EntityType.request, flexible=False)
class DeleteAclsRequest:
    filters: tuple[DeleteAclsFilter, ...]


@declared_schema(DELETE_ACLS, 0, EntityType.nested, flexible=False)
class DeleteAclsMatchingAcl:
    error_code: ErrorCode = _error()
    error_message: str | None = _string()
    resource_type: i8 = _int8()
    resource_name: str = _string()
    principal: str = _string()
    host: str = _string()
    operation: i8 = _int8()
    permission_type: i8 = _int8()


@declared_schema(DELETE_ACLS, 0, EntityType.nested, flexible=False)
class DeleteAclsFilterResult:
    error_code: ErrorCode = _error()
    error_message: str | None = _string()
    matching_acls: tuple[DeleteAclsMatchingAcl, ...]


@declared_schema(DELETE_ACLS, 0, EntityType.response, flexible=False)
class DeleteAclsResponse:
    throttle_time: i32Timedelta = _throttle()
    filter_results: tuple[DeleteAclsFilterResult, ...]


SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (DESCRIBE_ACLS, 0): (DescribeAclsRequest, DescribeAclsResponse),
    (CREATE_ACLS, 0): (CreateAclsRequest, CreateAclsResponse),
    (DELETE_ACLS, 0): (DeleteAclsRequest, DeleteAclsResponse),
}
"""(api_key, version) -> (request schema, response schema)."""
