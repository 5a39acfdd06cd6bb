"""The ACL APIs on the wire: version 0 of DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), declared in kio's
style (kio starts at v1), and the conversions between their entities and the ACL model of ``mq.security.acl``.

v0 is v1 without the pattern type fields (Kafka 2.0 added them with v1): a v0 filter or binding is LITERAL, and a
v0 response carries no pattern type. Field names are kio's v1 names, so one reader serves every version. (No
postponed annotations here: kio reads the field types at run time.)
"""

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i8, i32Timedelta

from mq.protocol.inter_broker import declared_schema, kafka_field
from mq.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31


@declared_schema(DESCRIBE_ACLS, 0, EntityType.request, flexible=False)
class DescribeAclsRequest:
    resource_type_filter: i8 = kafka_field("int8")
    resource_name_filter: str | None = kafka_field("string")
    principal_filter: str | None = kafka_field("string")
    host_filter: str | None = kafka_field("string")
    operation: i8 = kafka_field("int8")
    permission_type: i8 = kafka_field("int8")


@declared_schema(DESCRIBE_ACLS, 0, EntityType.nested, flexible=False)
class AclDescription:
    principal: str = kafka_field("string")
    host: str = kafka_field("string")
    operation: i8 = kafka_field("int8")
    permission_type: i8 = kafka_field("int8")


@declared_schema(DESCRIBE_ACLS, 0, EntityType.nested, flexible=False)
class DescribeAclsResource:
    resource_type: i8 = kafka_field("int8")
    resource_name: str = kafka_field("string")
    acls: tuple[AclDescription, ...]


@declared_schema(DESCRIBE_ACLS, 0, EntityType.response, flexible=False)
class DescribeAclsResponse:
    throttle_time: i32Timedelta = kafka_field("timedelta_i32")
    error_code: ErrorCode = kafka_field("error_code")
    error_message: str | None = kafka_field("string")
    resources: tuple[DescribeAclsResource, ...]


@declared_schema(CREATE_ACLS, 0, EntityType.nested, flexible=False)
class AclCreation:
    resource_type: i8 = kafka_field("int8")
    resource_name: str = kafka_field("string")
    principal: str = kafka_field("string")
    host: str = kafka_field("string")
    operation: i8 = kafka_field("int8")
    permission_type: i8 = kafka_field("int8")


@declared_schema(CREATE_ACLS, 0, EntityType.request, flexible=False)
class CreateAclsRequest:
    creations: tuple[AclCreation, ...]


@declared_schema(CREATE_ACLS, 0, EntityType.nested, flexible=False)
class AclCreationResult:
    error_code: ErrorCode = kafka_field("error_code")
    error_message: str | None = kafka_field("string")


@declared_schema(CREATE_ACLS, 0, EntityType.response, flexible=False)
class CreateAclsResponse:
    throttle_time: i32Timedelta = kafka_field("timedelta_i32")
    results: tuple[AclCreationResult, ...]


@declared_schema(DELETE_ACLS, 0, EntityType.nested, flexible=False)
class DeleteAclsFilter:
    resource_type_filter: i8 = kafka_field("int8")
    resource_name_filter: str | None = kafka_field("string")
    principal_filter: str | None = kafka_field("string")
    host_filter: str | None = kafka_field("string")
    operation: i8 = kafka_field("int8")
    permission_type: i8 = kafka_field("int8")


@declared_schema(DELETE_ACLS, 0, EntityType.request, flexible=False)
class DeleteAclsRequest:
    filters: tuple[DeleteAclsFilter, ...]


@declared_schema(DELETE_ACLS, 0, EntityType.nested, flexible=False)
class DeleteAclsMatchingAcl:
    error_code: ErrorCode = kafka_field("error_code")
    error_message: str | None = kafka_field("string")
    resource_type: i8 = kafka_field("int8")
    resource_name: str = kafka_field("string")
    principal: str = kafka_field("string")
    host: str = kafka_field("string")
    operation: i8 = kafka_field("int8")
    permission_type: i8 = kafka_field("int8")


@declared_schema(DELETE_ACLS, 0, EntityType.nested, flexible=False)
class DeleteAclsFilterResult:
    error_code: ErrorCode = kafka_field("error_code")
    error_message: str | None = kafka_field("string")
    matching_acls: tuple[DeleteAclsMatchingAcl, ...]


@declared_schema(DELETE_ACLS, 0, EntityType.response, flexible=False)
class DeleteAclsResponse:
    throttle_time: i32Timedelta = kafka_field("timedelta_i32")
    filter_results: tuple[DeleteAclsFilterResult, ...]


SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (DESCRIBE_ACLS, 0): (DescribeAclsRequest, DescribeAclsResponse),
    (CREATE_ACLS, 0): (CreateAclsRequest, CreateAclsResponse),
    (DELETE_ACLS, 0): (DeleteAclsRequest, DeleteAclsResponse),
}
"""(api_key, version) -> (request schema, response schema)."""


def filter_fields(binding_filter: AclBindingFilter) -> dict[str, Any]:
    """The fields of a DescribeAcls request or a DeleteAcls filter entry."""
    pattern, entry = binding_filter.pattern, binding_filter.entry
    return {
        "resource_type_filter": int(pattern.resource_type),
        "resource_name_filter": pattern.name,
        "pattern_type_filter": int(pattern.pattern_type),
        "principal_filter": entry.principal,
        "host_filter": entry.host,
        "operation": int(entry.operation),
        "permission_type": int(entry.permission_type),
    }


def filter_of(entity: Any) -> AclBindingFilter:
    """The filter of a DescribeAcls request or a DeleteAcls filter entry (v0: LITERAL)."""
    return AclBindingFilter(
        ResourcePatternFilter(
            ResourceType.of(entity.resource_type_filter),
            entity.resource_name_filter,
            PatternType.of(getattr(entity, "pattern_type_filter", PatternType.LITERAL)),
        ),
        AccessControlEntryFilter(
            entity.principal_filter,
            entity.host_filter,
            AclOperation.of(entity.operation),
            AclPermissionType.of(entity.permission_type),
        ),
    )


def binding_fields(binding: AclBinding, pattern_type_field: str = "pattern_type") -> dict[str, Any]:
    """The fields of a binding: a CreateAcls creation (``pattern_type_field`` ``resource_pattern_type``) or a
    DeleteAcls matching ACL."""
    pattern, entry = binding.pattern, binding.entry
    return {
        "resource_type": int(pattern.resource_type),
        "resource_name": pattern.name,
        pattern_type_field: int(pattern.pattern_type),
        **entry_fields(entry),
    }


def entry_fields(entry: AccessControlEntry) -> dict[str, Any]:
    """The fields of an entry (a DescribeAcls ACL description)."""
    return {
        "principal": entry.principal,
        "host": entry.host,
        "operation": int(entry.operation),
        "permission_type": int(entry.permission_type),
    }


def binding_of(resource: Any, acl: Any, pattern_type_field: str = "pattern_type") -> AclBinding:
    """The binding of a wire resource (resource_type, resource_name and the pattern type field; v0: LITERAL) and a
    wire ACL (principal, host, operation, permission_type); one entity may be both."""
    return AclBinding(
        ResourcePattern(
            ResourceType.of(resource.resource_type),
            resource.resource_name,
            PatternType.of(getattr(resource, pattern_type_field, PatternType.LITERAL)),
        ),
        AccessControlEntry(
            acl.principal, acl.host, AclOperation.of(acl.operation), AclPermissionType.of(acl.permission_type)
        ),
    )
