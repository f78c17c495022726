"""A sample origin server for the demo, the tests and the benchmarks (see :mod:`.server`)."""
