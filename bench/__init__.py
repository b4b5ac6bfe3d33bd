"""Benchmarks that print ratios measured side by side in one run, each a module run as `python -m bench.<name>`
(docs/performance.md: what each measures, its current figures); fairness/ is the dispatch simulator."""
