module pyproflab.test/regprog

go 1.26
