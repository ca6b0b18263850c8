package main

import "github.com/crashmatrix/crashmatrix/internal/cmdkit"

// progressLog starts a run's progress lines outside a terminal (cmdkit).
var progressLog = cmdkit.ProgressLog
