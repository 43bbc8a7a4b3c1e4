module pyproflab/helper

go 1.26.0

require (
	github.com/apache/arrow-go/v18 v18.8.0
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4
)

require (
	github.com/goccy/go-json v0.10.6 // indirect
	github.com/google/flatbuffers v25.12.19+incompatible // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.29 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
