"""Two embedded endpoints as two AWS Regions, and a replicator between their tables that behaves as DynamoDB
global tables in their default mode (MREC): asynchronous, item by item, last writer wins
(docs/local-stack.md, "Two regions on one machine")."""
