"""Tests of the embedded endpoint's fixes to moto (onward_infra/moto_fixes/): each fix against stock moto's
answers, the request loop, sizes, transactions, queries, scans and the expression caches."""
