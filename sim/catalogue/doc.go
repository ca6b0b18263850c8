// Package catalogue is what a run runs: the cases of the crash matrix and
// how they are chosen.
//
// A Case is a script of worker steps (Step, Action) with the faults each
// worker arms; the builders lay out the matrix (Matrix, WindowCase,
// PowerLossMatrix, StoreMatrix, ServerMatrix), the case classes beside it
// (ClassCases, SecondCases, the in-flight, replan, between-calls and
// durable-step classes) and the random kills, and Selection, Filter and
// Shard pick a run's share of them. A case is plain data: the runner (package
// sim) runs it, package verdict judges what it showed. The catalogue
// imports nothing of either; what it draws on from a run (the store windows
// and counts a probe found) it takes as plain data (Probe).
package catalogue
