module pyproflab.test/fleet

go 1.26.0

require github.com/prometheus/client_golang v1.25.0 // indirect
