module github.com/codecell-dev/codecell

go 1.26

require github.com/evanw/esbuild v0.28.2

require golang.org/x/sys v0.38.0
