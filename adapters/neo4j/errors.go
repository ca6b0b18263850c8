package neo4j

import (
	"context"
	"errors"
	"net/url"
	"strings"

	driver "github.com/neo4j/neo4j-go-driver/v5/neo4j"
)

// Error is an error of the Neo4j writer, classified for the retry policy
// of reference.IsRetryable: Permanent reports true for errors a retry
// cannot fix (constraint violations, syntax and schema errors,
// authentication and authorisation failures, invalid requests and driver
// usage errors); transient server errors, lost connections, pool timeouts
// and exhausted driver retries are retryable. Its message never contains
// the password the writer was opened with.
type Error struct {
	// Op says what failed ("open", "apply to space s", ...).
	Op string
	// Code is the Neo4j status code (e.g. Neo.ClientError.Schema.
	// ConstraintValidationFailed), empty if the error did not come from
	// the server.
	Code string
	// Retryable reports whether retrying the same call may succeed.
	Retryable bool
	// Err is the underlying error.
	Err    error
	secret string
}

// Error renders the error, with the password redacted.
func (e *Error) Error() string {
	msg := "neo4j " + e.Op
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.secret != "" {
		msg = strings.ReplaceAll(msg, e.secret, "[REDACTED]")
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Permanent reports whether a retry of the same call cannot succeed.
func (e *Error) Permanent() bool { return !e.Retryable }

// Classify reports the Neo4j status code of err (if any) and whether
// retrying may succeed.
func Classify(err error) (code string, retryable bool) {
	if err == nil {
		return "", false
	}
	var ne *driver.Neo4jError
	if errors.As(err, &ne) {
		code = ne.Code
		switch {
		case ne.IsRetriable():
			return code, true
		case strings.HasPrefix(code, "Neo.TransientError."):
			return code, true
		case strings.HasPrefix(code, "Neo.ClientError.Transaction."):
			// terminated or timed-out transactions: the statement is fine
			return code, true
		case strings.HasPrefix(code, "Neo.ClientError."):
			// Schema.*, Statement.*, Security.*, Request.*, Procedure.*,
			// Database.DatabaseNotFound, ...
			return code, false
		case strings.HasPrefix(code, "Neo.DatabaseError."):
			return code, true
		}
		return code, false
	}
	var p interface{ Permanent() bool }
	if errors.As(err, &p) {
		return "", !p.Permanent()
	}
	var ce *driver.ConnectivityError
	var tl *driver.TransactionExecutionLimit
	var ue *driver.UsageError
	var ae *driver.InvalidAuthenticationError
	switch {
	case errors.As(err, &ce), errors.As(err, &tl):
		return "", true
	case errors.As(err, &ue), errors.As(err, &ae):
		return "", false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "", true
	case driver.IsRetryable(err):
		return "", true
	}
	var ue2 *url.Error
	if errors.As(err, &ue2) {
		return "", false
	}
	// Unknown errors: retryable, the retry budget bounds them.
	return "", true
}

// wrap classifies err as an *Error of op.
func (w *Writer) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	code, retryable := Classify(err)
	return &Error{Op: op, Code: code, Retryable: retryable, Err: err, secret: w.secret}
}

// redactURI drops a password embedded in uri, for messages.
func redactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "(unparsable URI)"
	}
	return u.Redacted()
}
