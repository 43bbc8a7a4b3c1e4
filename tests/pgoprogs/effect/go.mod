module example.com/pgoeffect

go 1.24
