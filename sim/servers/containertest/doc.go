// Package containertest holds the tests that run against PostgreSQL and
// Neo4j started for real by testcontainers-go: every conformance suite
// against the PostgreSQL stores and the Neo4j writer, and the full crash
// matrix with PostgreSQL + Neo4j as the backend. Without a container engine
// or the images they fail and say what is missing; they never skip.
package containertest
