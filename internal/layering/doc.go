// Package layering holds the test that keeps crashmatrix's packages in
// data-flow order (ARCHITECTURE.md): faults, reference, history, check,
// adapters, sim, then what drives sim (scenarios, properties, report) and
// the commands. A package may import its own layer or lower ones only.
package layering
