package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Error is a PostgreSQL failure of one store operation: the operation and
// the ids it concerns, the classified cause, and whether retrying can help.
// Its message never contains the connection password.
type Error struct {
	// Op names the store operation, e.g. "operations.create".
	Op string
	// IDs names what the operation concerned, e.g. "operation op-1".
	IDs string
	// Code is the SQLSTATE of the server error, if there was one.
	Code string
	// Err is the underlying error (a pgx/pgconn error or a context error).
	Err error

	permanent bool
	unknown   bool
	secret    string
}

// Error renders the operation, ids and cause, with the password redacted.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("postgres ")
	b.WriteString(e.Op)
	if e.IDs != "" {
		b.WriteString(" (")
		b.WriteString(e.IDs)
		b.WriteString(")")
	}
	if e.Code != "" {
		b.WriteString(" [SQLSTATE ")
		b.WriteString(e.Code)
		b.WriteString("]")
	}
	if e.permanent {
		b.WriteString(" (permanent)")
	}
	if e.unknown {
		b.WriteString(" (outcome unknown)")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(collapseRepeats(redact(e.Err.Error(), e.secret)))
	}
	return b.String()
}

// collapseRepeats writes a line that repeats an earlier one of msg once:
// pgx lists every connection attempt (sslmode=prefer tries TLS, then
// plain), and an unreachable server fails each the same way.
func collapseRepeats(msg string) string {
	lines := strings.Split(msg, "\n")
	if len(lines) < 2 {
		return msg
	}
	seen := map[string]int{}
	var out []string
	for _, l := range lines {
		if n, ok := seen[l]; ok && strings.TrimSpace(l) != "" {
			seen[l] = n + 1
			continue
		}
		seen[l] = 1
		out = append(out, l)
	}
	for i, l := range out {
		if n := seen[l]; n > 1 && strings.TrimSpace(l) != "" {
			out[i] = fmt.Sprintf("%s (%d attempts)", l, n)
		}
	}
	return strings.Join(out, "\n")
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Permanent reports whether retrying cannot help (schema, syntax,
// permission, authentication or data errors): the reference service
// dead-letters such an operation instead of retrying it.
func (e *Error) Permanent() bool { return e.permanent }

// OutcomeUnknown reports whether the request may have reached the server
// and committed although no reply came back (a lost reply, a connection
// cut or reset mid-request, a timeout after the request left): neither a
// definite failure, which may be retried as new, nor a permanent one. The
// caller must read back what it wrote before deciding
// (reference.IsOutcomeUnknown).
func (e *Error) OutcomeUnknown() bool { return e.unknown }

// OutcomeUnknown reports whether err is a failure of the connection after
// the request may have left: pgx's SafeToRetry tells the requests that
// never left apart (a refused or failed connect, a write that sent
// nothing); a server error is an answer, so its outcome is known.
func OutcomeUnknown(err error) bool {
	if err == nil || pgconn.SafeToRetry(err) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return false
	}
	if pgconn.Timeout(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"conn closed", "unexpected EOF", "connection reset", "broken pipe", "failed to receive message", "timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// permanentClasses are the SQLSTATE classes (first two characters) that no
// retry can fix.
var permanentClasses = map[string]bool{
	"0A": true, // feature not supported
	"22": true, // data exception
	"23": true, // integrity constraint violation (those the stores expect are handled before)
	"26": true, // invalid SQL statement name
	"28": true, // invalid authorization specification
	"2B": true, // dependent privilege descriptors still exist
	"34": true, // invalid cursor name
	"3D": true, // invalid catalog (database) name
	"3F": true, // invalid schema name
	"42": true, // syntax error or access rule violation (undefined table/column, permission)
	"44": true, // WITH CHECK OPTION violation
	"F0": true, // configuration file error
}

// SQLState returns the SQLSTATE of the PostgreSQL error in err's chain, or
// "".
func SQLState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// IsPermanentCode reports whether a SQLSTATE denotes an error that retrying
// cannot fix (class 42 syntax/undefined object/privilege, 28 auth, 3D
// unknown database, 22 data, ...).
func IsPermanentCode(code string) bool {
	return len(code) >= 2 && permanentClasses[code[:2]]
}

// IsRetryableCode reports whether a SQLSTATE denotes a transaction that was
// rolled back by a serialization failure or a deadlock and may simply be
// run again.
func IsRetryableCode(code string) bool {
	return code == "40001" || code == "40P01"
}

// wrap classifies err (nil stays nil; errors that are already *Error or
// that carry a reference sentinel are returned as they are, so errors.Is on
// them keeps working).
func (d *db) wrap(op, ids string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) && !isPgxError(err) {
		// A reference error (ErrNotFound, ErrInvalidRevision...) or a
		// context error: keep it as it is.
		return err
	}
	code := SQLState(err)
	// The lost-commit-is-failure mutant reports a lost reply as a definite
	// failure ("failed, retry as new").
	unknown := OutcomeUnknown(err) && !d.opts.LostCommitIsFailure
	return &Error{Op: op, IDs: ids, Code: code, Err: err, permanent: IsPermanentCode(code), unknown: unknown, secret: d.password}
}

// isPgxError reports whether err comes from the driver (connection
// failures, closed pool...), which the stores wrap with their context.
func isPgxError(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return true
	}
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err) || strings.Contains(err.Error(), "closed pool") ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF")
}

var (
	// key=value DSN: password=secret or password='sec ret'.
	kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]*)`)
	// URL DSN: scheme://user:secret@host.
	urlPassword = regexp.MustCompile(`(://[^:/@\s]*:)([^@\s]*)(@)`)
)

// RedactDSN returns dsn with any password replaced by "xxxxx", for URL
// (postgres://user:pw@host/db?password=pw) and key=value
// (host=h password=pw) forms alike.
func RedactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.Host != "" {
		if u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			}
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	s := urlPassword.ReplaceAllString(dsn, "${1}xxxxx${3}")
	return kvPassword.ReplaceAllString(s, "${1}xxxxx")
}

// redact removes secret (the connection password) and any DSN password
// syntax from a message.
func redact(msg, secret string) string {
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, "xxxxx")
		if esc := url.QueryEscape(secret); esc != secret {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
		if esc := url.PathEscape(secret); esc != secret {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
	}
	s := urlPassword.ReplaceAllString(msg, "${1}xxxxx${3}")
	return kvPassword.ReplaceAllString(s, "${1}xxxxx")
}
