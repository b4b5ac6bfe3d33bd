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
    archive = {name for name in RESOURCES if name.startswith("Archive") and not name.startswith("Archiver")}
    assert archive and not archive & set(local)
    assert "ArchiveRetentionDays" not in data_resources_template(TEMPLATE)["Parameters"]


def _client_calls(module: str, service: str) -> set[str]:
    """The IAM actions of the SDK calls `module` makes (`.start_query_execution(` -> athena:StartQueryExecution):
    its source read for the service's operation names, as botocore spells them in Python."""
    import re
    from pathlib import Path

    import botocore.session

    model = botocore.session.get_session().get_service_model(service)
    names = {botocore.xform_name(name): name for name in model.operation_names}
    source = (Path(__file__).resolve().parents[3] / module).read_text()
    return {f"{service}:{names[call]}" for call in re.findall(r"\.([a-z_]+)\(", source) if call in names}


def _statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    return policy["PolicyDocument"]["Statement"]


def _role_policy(role: str, name: str) -> dict[str, Any]:
    (policy,) = [p for p in RESOURCES[role]["Properties"]["Policies"] if p["PolicyName"] == name]
    return policy


def test_the_archiver_may_only_put_records_to_the_archives_delivery_stream() -> None:
    """Its `archive` policy is exactly the sink's calls, on the stream; drop it and every archive write is
    refused (AccessDenied), grant more and the test fails. The stream reaches the code as the variable its name
    says (ARCHIVE_DELIVERY_STREAM)."""
    (statement,) = _statements(_role_policy("ArchiverRole", "archive"))
    assert set(statement["Action"]) == _client_calls("onward/pipeline/archive/firehose.py", "firehose")
    assert statement["Resource"] == {"Fn::GetAtt": ["ArchiveDeliveryStream", "Arn"]}
    variables = RESOURCES["ArchiverFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["ARCHIVE_DELIVERY_STREAM"] == {"Ref": "ArchiveDeliveryStream"}


def test_the_api_and_operators_read_the_archive_with_the_readers_calls_and_nothing_else() -> None:
    """GET /jobs/{id} of an archived job and `onward history` query Athena in the archive's work group: the
    Athena actions are exactly the reader's calls, and S3 is read only under jobs/ and written only under
    athena-results/ (a grant on the whole bucket would let the API overwrite the archive)."""
    api = _statements(_role_policy("ApiRole", "archive"))
    assert api == _statements(RESOURCES["ArchiveReadPolicy"]["Properties"])
    athena = {action for statement in api for action in statement["Action"] if action.startswith("athena:")}
    assert athena == _client_calls("onward/operator/history/readers.py", "athena")
    writes = [s for s in api if "s3:PutObject" in s["Action"]]
    assert [s["Resource"] for s in writes] == [{"Fn::Sub": "${ArchiveBucket.Arn}/athena-results/*"}]
    assert all(not action.startswith(("dynamodb:", "firehose:")) for s in api for action in s["Action"])
    variables = RESOURCES["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert {variables[name]["Ref"] for name in ("ARCHIVE_DATABASE", "ARCHIVE_TABLE", "ARCHIVE_WORK_GROUP")} == {
        "ArchiveDatabase", "ArchiveTable", "ArchiveWorkGroup"}
    assert TEMPLATE["Outputs"]["ArchiveReadPolicyArn"]["Value"] == {"Ref": "ArchiveReadPolicy"}
