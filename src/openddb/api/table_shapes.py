"""The request shapes of CreateTable, DescribeTable, ListTables, UpdateTable and DeleteTable (their members' types,
lengths and enumerations, checked by `validation`)."""

from __future__ import annotations

from openddb.api import indexes as ix
from openddb.api import validation as v
from openddb.api.tags import TAGS
from openddb.vectors.definitions import VECTOR_INDEX, VECTOR_INDEX_UPDATES

_KEY_SCHEMA = v.List(ix.KEY_ELEMENT, required=True, min_len=1, max_len=2)


_ATTRIBUTE_DEFINITIONS = v.List(v.Struct({
    "AttributeName": v.Str(required=True, min_len=1, max_len=255),
    "AttributeType": v.Str(required=True, enum=("S", "N", "B")),
}), required=True)


_STREAM = v.Struct({  # (the view types in the order DynamoDB's enum message lists them)
    "StreamEnabled": v.Bool(required=True),
    "StreamViewType": v.Str(enum=("OLD_IMAGE", "KEYS_ONLY", "NEW_AND_OLD_IMAGES", "NEW_IMAGE")),
})


SSE_SPECIFICATION = v.Struct({
    "Enabled": v.Bool(),
    "SSEType": v.Str(enum=("AES256", "KMS")),
    "KMSMasterKeyId": v.Str(),
})


_BILLING_MODE = v.Str(enum=("PROVISIONED", "PAY_PER_REQUEST"))


_TABLE_CLASS = v.Str(enum=("STANDARD", "STANDARD_INFREQUENT_ACCESS"))


# Global-table members are checked for their shapes only (this server keeps no replicas), in the API's terms.
_REPLICATION_MODE = v.Str(enum=("ENABLED", "DISABLED", "ENABLED_WITH_OVERRIDES"))


_REGION = v.Struct({"RegionName": v.Str(required=True)})


_REPLICA_CHANGE = v.Struct({
    "RegionName": v.Str(required=True),
    "KMSMasterKeyId": v.Str(),
    "ProvisionedThroughputOverride": v.Any_(),
    "OnDemandThroughputOverride": v.Any_(),
    "GlobalSecondaryIndexes": v.List(v.Any_(), min_len=1),
    "TableClassOverride": _TABLE_CLASS,
})


_REPLICA_UPDATES = v.List(v.Struct({"Create": _REPLICA_CHANGE, "Update": _REPLICA_CHANGE, "Delete": _REGION}),
                          min_len=1)


_WITNESS_UPDATES = v.List(v.Struct({"Create": _REGION, "Delete": _REGION}), min_len=1, max_len=1)


CREATE_TABLE = v.Struct({
    "AttributeDefinitions": _ATTRIBUTE_DEFINITIONS,
    "TableName": v.table_name(),
    "KeySchema": _KEY_SCHEMA,
    "LocalSecondaryIndexes": v.List(ix.LSI),
    "GlobalSecondaryIndexes": v.List(ix.GSI),
    "VectorIndexes": v.List(VECTOR_INDEX),
    "BillingMode": _BILLING_MODE,
    "TableThroughputMode": _BILLING_MODE,
    "ProvisionedThroughput": ix.THROUGHPUT,
    "StreamSpecification": _STREAM,
    "SSESpecification": SSE_SPECIFICATION,
    "Tags": TAGS,
    "TableClass": _TABLE_CLASS,
    "DeletionProtectionEnabled": v.Bool(),
    "WarmThroughput": ix.WARM,
    "ResourcePolicy": v.Str(),
    "OnDemandThroughput": ix.ON_DEMAND,
    "GlobalTableSourceArn": v.Str(min_len=1, max_len=1024),
    "GlobalTableSettingsReplicationMode": _REPLICATION_MODE,
})


DESCRIBE_TABLE = v.Struct({"TableName": v.table_name_or_arn()})


DELETE_TABLE = v.Struct({"TableName": v.table_name_or_arn()})


LIST_TABLES = v.Struct({
    "ExclusiveStartTableName": v.Str(min_len=3, max_len=255, pattern=v.TABLE_NAME_PATTERN),
    "Limit": v.Int(minimum=1, maximum=100, java="Integer"),
})


UPDATE_TABLE = v.Struct({
    "AttributeDefinitions": v.List(_ATTRIBUTE_DEFINITIONS.member),
    "TableName": v.table_name_or_arn(),
    "BillingMode": _BILLING_MODE,
    "TableThroughputMode": _BILLING_MODE,
    "ProvisionedThroughput": ix.THROUGHPUT,
    "GlobalSecondaryIndexUpdates": ix.GSI_UPDATES,
    "VectorIndexUpdates": VECTOR_INDEX_UPDATES,
    "StreamSpecification": CREATE_TABLE.fields["StreamSpecification"],
    "SSESpecification": SSE_SPECIFICATION,
    "ReplicaUpdates": _REPLICA_UPDATES,
    "TableClass": _TABLE_CLASS,
    "DeletionProtectionEnabled": v.Bool(),
    "MultiRegionConsistency": v.Str(enum=("EVENTUAL", "STRONG")),
    "GlobalTableWitnessUpdates": _WITNESS_UPDATES,
    "OnDemandThroughput": ix.ON_DEMAND,
    "WarmThroughput": ix.WARM,
    "GlobalTableSettingsReplicationMode": _REPLICATION_MODE,
    "DisassociationProtectionEnabled": v.Bool(),
})
