package worker

import (
	"os"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
)

// fileCallLog is a reference.CallLog shared by every process of a case: one
// file per operationId under dir, one byte appended per call; the ordinal is
// the file's size after the append. Each call is also written to the
// history.
type fileCallLog struct {
	dir  string
	hist *history.Writer
}

// MemCallLog is the in-process CallLog: shared by the workers of a case,
// it survives their simulated crashes as the harness's file log does.
type MemCallLog struct {
	Log  *reference.MemoryCallLog
	Hist *history.Writer
}

func (l *MemCallLog) Record(op string) (int, error) {
	n, err := l.Log.Record(op)
	if err == nil {
		l.Hist.Append(history.Record{Kind: history.Model, Op: op, Call: n})
	}
	return n, err
}

func (l *fileCallLog) Record(op string) (int, error) {
	name := CallLogFile(l.dir, op)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Write([]byte{'.'}); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	n := int(st.Size())
	l.hist.Append(history.Record{Kind: history.Model, Op: op, Call: n})
	return n, nil
}
