//go:build race

package integration

// raceBuild: under go test -race, the daemon is built with -race too, so
// the end-to-end tests catch its data races.
const raceBuild = true
