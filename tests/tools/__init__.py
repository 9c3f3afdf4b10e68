"""Tests of tools/: the command line, the service, the benchmarks."""
