// Package powertest holds the tests of power loss on the server backends:
// PostgreSQL and Neo4j started by testcontainers-go with their data
// directories on lazy mounts (faults/lazyfs), killed together with every
// worker of a case, their un-synced writes dropped, and started again on
// what is left; and of disk errors on PostgreSQL's data mount (an fsync
// that fails with EIO, a full disk), each followed by a power cut.
// Without a container engine, the images or FUSE they fail
// and say what is missing; they never skip.
package powertest
