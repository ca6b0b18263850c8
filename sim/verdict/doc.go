// Package verdict is what a case showed: its Verdict (Pass, Fail,
// NotExercised, Undecided, NotApplicable), the CaseResult the runner
// records, why a case whose fault did not fire was not exercised
// (NotExercisedReason and its Causes), and the Report of a run with its
// counts, exit code and the views the reports read (StoreRows,
// DurableStepsOf, RandomKillsOf, Columns).
//
// It judges, it does not run: it reads the cases (package catalogue) and
// what the runner (package sim) recorded, and imports neither the runner
// nor any store.
package verdict
