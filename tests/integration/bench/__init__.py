"""The benchmarks of bench/ in a reduced mode against the embedded endpoint: counts and ratios, never
absolute times."""
