package main

import "runtime"

func runtimeSetRate(hz int) { runtime.SetCPUProfileRate(hz) }
