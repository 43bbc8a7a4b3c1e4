module example.com/router.v2

go 1.24
