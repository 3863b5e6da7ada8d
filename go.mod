module github.com/codecell-dev/codecell

go 1.26

require github.com/evanw/esbuild v0.28.2

require (
	github.com/google/jsonschema-go v0.4.3
	golang.org/x/sys v0.41.0
)

require github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect
