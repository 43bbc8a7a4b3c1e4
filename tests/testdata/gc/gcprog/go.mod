module gcprog

go 1.21
