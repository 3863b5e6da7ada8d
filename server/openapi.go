package server

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 document of the REST API. It is written by
// hand, for people as much as for generators; TestOpenAPI holds it to the
// routes and to the api package's types.
//
//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
