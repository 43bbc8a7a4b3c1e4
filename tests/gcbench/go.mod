module pyproflab.test/gcbench

go 1.26
