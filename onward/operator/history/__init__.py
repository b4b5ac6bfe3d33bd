"""Querying the run-history archive (issue 36): the ready-made questions as SQL both engines read
(questions), and the readers that run them over the archive: DuckDB over the local Parquet directory, Athena
over the Glue table on AWS (readers)."""
