package neo4j

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

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
	Err error
	// Unknown reports that the request may have reached the server and
	// committed although no reply came back (OutcomeUnknown).
	Unknown bool
	secret  string
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

// OutcomeUnknown reports whether the write may have committed although no
// reply came back: the connection failed mid-request (the driver's own
// retries of a managed transaction were exhausted on it). The caller must
// read back before deciding (reference.IsOutcomeUnknown).
func (e *Error) OutcomeUnknown() bool { return e.Unknown }

// OutcomeUnknown reports whether err is a connection failure after the
// request may have left: a ConnectivityError that is not a failure to
// connect or to get a connection from the pool, or a context that ended
// mid-request; a server answer (Neo4jError) is a known outcome.
func OutcomeUnknown(err error) bool {
	if err == nil {
		return false
	}
	var ne *driver.Neo4jError
	if errors.As(err, &ne) {
		return false
	}
	var ce *driver.ConnectivityError
	if errors.As(err, &ce) {
		// Waiting for a pooled connection, or dialling one, sent nothing.
		msg := ce.Error()
		var op *net.OpError
		if strings.Contains(msg, "waiting for connection") || strings.Contains(msg, "No idle connections") ||
			errors.As(ce.Inner, &op) && op.Op == "dial" {
			return false
		}
		return true // "Connection lost during commit", a read or write that failed mid-request
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

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
	return &Error{Op: op, Code: code, Retryable: retryable, Unknown: retryable && OutcomeUnknown(err), Err: err, secret: w.secret}
}

// redactURI drops a password embedded in uri, for messages.
func redactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "(unparsable URI)"
	}
	return u.Redacted()
}
