"""Benchmarks: ratios measured side by side in one run (``python benchmarks/<name>.py``); not tests."""
