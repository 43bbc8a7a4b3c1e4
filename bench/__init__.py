"""Benchmarks for `make bench`: pyproflab measured beside `go tool pprof` in one run."""
