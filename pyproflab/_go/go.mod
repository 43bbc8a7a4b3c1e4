module pyproflab/helper

go 1.24
