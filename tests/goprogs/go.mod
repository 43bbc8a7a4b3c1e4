module pyproflab.test/goprogs

go 1.26
