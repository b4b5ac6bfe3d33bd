"""Unit tests of onward/store/: the claim's reads and sharing, the DynamoDB adapter's items, writes, batch and
partition reads, and the job retention the items carry, on fakes or the in-memory store."""
