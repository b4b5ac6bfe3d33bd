"""template.yaml's run-history archive (docs/archive.md): the Glue table is the record's columns, the delivery
stream writes where the table reads, the bucket is private, encrypted and tiered, Firehose's role can do only
its delivery, and the local stack leaves all of it out (its archive is a directory)."""

from __future__ import annotations

from typing import Any

from onward.domain.archive import ArchivedJob, glue_columns
from onward_infra.template import data_resources_template, load_template

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
TABLE = RESOURCES["ArchiveTable"]["Properties"]["TableInput"]
DESTINATION = RESOURCES["ArchiveDeliveryStream"]["Properties"]["ExtendedS3DestinationConfiguration"]
BUCKET = RESOURCES["ArchiveBucket"]["Properties"]


def test_the_glue_tables_columns_are_the_records() -> None:
    """Add a field to ArchivedJob without the column (or change a type) and this fails: Firehose would drop
    the field when it converts, and Athena could not read it."""
    columns = [(column["Name"], column["Type"]) for column in TABLE["StorageDescriptor"]["Columns"]]
    assert columns == glue_columns()
    assert TABLE["PartitionKeys"] == [{"Name": "day", "Type": "string"}]
    assert set(ArchivedJob.model_fields) == {name for name, _ in columns} | {"day"}


def test_firehose_writes_under_the_prefixes_the_tables_projection_reads() -> None:
    """The table projects `day` onto jobs/day=<day>/ and the stream partitions by the record's day (then tenant,
    a folder Athena reads as part of the day's prefix): change either side alone and queries find nothing."""
    parameters = TABLE["Parameters"]
    assert parameters["projection.enabled"] == "true" and parameters["projection.day.type"] == "date"
    assert parameters["projection.day.format"] == "yyyy-MM-dd"
    assert parameters["storage.location.template"] == {"Fn::Sub": "s3://${ArchiveBucket}/jobs/day=${!day}/"}
    assert TABLE["StorageDescriptor"]["Location"] == {"Fn::Sub": "s3://${ArchiveBucket}/jobs/"}
    assert DESTINATION["Prefix"] == "jobs/day=!{partitionKeyFromQuery:day}/tenant=!{partitionKeyFromQuery:tenant}/"
    assert DESTINATION["ErrorOutputPrefix"].startswith("errors/")
    (extraction,) = DESTINATION["ProcessingConfiguration"]["Processors"]
    query = {p["ParameterName"]: p["ParameterValue"] for p in extraction["Parameters"]}["MetadataExtractionQuery"]
    assert extraction["Type"] == "MetadataExtraction" and query == "{day: .day, tenant: .tenant}"
    assert DESTINATION["DynamicPartitioningConfiguration"]["Enabled"] is True


def test_firehose_converts_to_parquet_with_the_tables_schema_in_large_buffers() -> None:
    conversion = DESTINATION["DataFormatConversionConfiguration"]
    assert conversion["Enabled"] is True
    assert conversion["InputFormatConfiguration"] == {"Deserializer": {"OpenXJsonSerDe": {}}}
    assert "ParquetSerDe" in conversion["OutputFormatConfiguration"]["Serializer"]
    schema = conversion["SchemaConfiguration"]
    assert (schema["DatabaseName"], schema["TableName"]) == ({"Ref": "ArchiveDatabase"}, {"Ref": "ArchiveTable"})
    assert DESTINATION["BufferingHints"]["SizeInMBs"] >= 64  # Firehose's floor when it converts
    assert DESTINATION["CompressionFormat"] == "UNCOMPRESSED"  # required with conversion
    stream = RESOURCES["ArchiveDeliveryStream"]["Properties"]
    assert stream["DeliveryStreamType"] == "DirectPut"
    assert stream["DeliveryStreamEncryptionConfigurationInput"] == {"KeyType": "AWS_OWNED_CMK"}


def test_the_bucket_is_private_encrypted_tiered_and_expires_after_the_retention() -> None:
    assert BUCKET["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    assert all(BUCKET["PublicAccessBlockConfiguration"].values()) and len(BUCKET["PublicAccessBlockConfiguration"]) == 4
    assert BUCKET["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    rules = {rule.get("Prefix"): rule for rule in BUCKET["LifecycleConfiguration"]["Rules"]}
    assert all(rule["Status"] == "Enabled" for rule in rules.values())
    assert rules["jobs/"]["Transitions"] == [{"StorageClass": "STANDARD_IA", "TransitionInDays": 30},
                                             {"StorageClass": "GLACIER_IR", "TransitionInDays": 90}]
    assert rules["jobs/"]["ExpirationInDays"] == {"Ref": "ArchiveRetentionDays"}
    retention = TEMPLATE["Parameters"]["ArchiveRetentionDays"]
    assert retention["Default"] == 730 and retention["MinValue"] > 90  # expiry after the last transition
    assert rules["athena-results/"]["ExpirationInDays"] == 7
    output = RESOURCES["ArchiveWorkGroup"]["Properties"]["WorkGroupConfiguration"]["ResultConfiguration"]
    assert output["OutputLocation"] == {"Fn::Sub": "s3://${ArchiveBucket}/athena-results/"}
    (deny,) = RESOURCES["ArchiveBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_firehoses_role_writes_only_the_archives_prefixes_and_reads_only_its_table() -> None:
    """Grant s3:PutObject on the whole bucket (or s3:DeleteObject at all), or Glue on "*", and this fails."""
    role = RESOURCES["ArchiveDeliveryRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "firehose.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"sts:ExternalId": {"Ref": "AWS::AccountId"}}}
    (policy,) = role["Policies"]
    granted = {action: statement["Resource"] for statement in policy["PolicyDocument"]["Statement"]
               for action in statement["Action"]}
    assert set(granted) == {"s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads",
                            "s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload", "glue:GetTable",
                            "glue:GetTableVersion", "glue:GetTableVersions", "logs:PutLogEvents"}
    assert granted["s3:PutObject"] == granted["s3:GetObject"] == [{"Fn::Sub": "${ArchiveBucket.Arn}/jobs/*"},
                                       {"Fn::Sub": "${ArchiveBucket.Arn}/errors/*"}]
    assert "*" not in str(granted["glue:GetTable"]).replace("${", "")
    assert all(statement["Effect"] == "Allow" for statement in policy["PolicyDocument"]["Statement"])


def test_the_outputs_name_the_archives_resources() -> None:
    outputs = TEMPLATE["Outputs"]
    assert outputs["ArchiveDeliveryStreamName"]["Value"] == {"Ref": "ArchiveDeliveryStream"}
    assert outputs["ArchiveDatabaseName"]["Value"] == {"Ref": "ArchiveDatabase"}
    assert outputs["ArchiveTableName"]["Value"] == {"Ref": "ArchiveTable"}
    assert outputs["ArchiveWorkGroupName"]["Value"] == {"Ref": "ArchiveWorkGroup"}


def test_the_local_stack_leaves_the_archive_out() -> None:
    """moto's CloudFormation creates no delivery stream, Glue table or work group, and its Firehose neither
    converts nor partitions: the local stack's archive is a directory of Parquet files
    (onward.pipeline.archive.parquet), so none of these resources is deployed there."""
    local = data_resources_template(TEMPLATE)["Resources"]
    archive = {name for name in RESOURCES if name.startswith("Archive")}
    assert archive and not archive & set(local)
    assert "ArchiveRetentionDays" not in data_resources_template(TEMPLATE)["Parameters"]
