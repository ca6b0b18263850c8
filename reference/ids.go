package reference

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// Normalize folds a name for identity: NFKC, trimmed, inner whitespace
// collapsed to one space, lower-cased.
func Normalize(s string) string {
	s = norm.NFKC.String(s)
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// NodeID derives the stable id of an entity node from its type and canonical
// name: lower(type) ":" first 12 bytes of SHA-256(norm(type) "\n" norm(name)),
// hex encoded, as the Agents-Flex HashGraphEntityIdGenerator does.
func NodeID(entityType, canonicalName string) string {
	return nodeIDOf(entityType, Normalize(canonicalName))
}

// nodeIDOf is NodeID of a name already in the form it is hashed in; with
// the name as written (trimmed), not normalised, it is
// BugNodeIDIgnoresCase.
func nodeIDOf(entityType, name string) string {
	sum := sha256.Sum256([]byte(Normalize(entityType) + "\n" + name))
	return strings.ToLower(strings.TrimSpace(entityType)) + ":" + hex.EncodeToString(sum[:12])
}

// EdgeKey is the stable identity of an edge: source, type, target, rank.
type EdgeKey struct {
	Source string `json:"source"`
	Type   string `json:"type"`
	Target string `json:"target"`
	Rank   int64  `json:"rank"`
}

// PortableID joins the four parts with U+001F, as Agents-Flex does.
func (k EdgeKey) PortableID() string {
	return k.Source + "\x1f" + k.Type + "\x1f" + k.Target + "\x1f" + strconv.FormatInt(k.Rank, 10)
}

// String renders the key for people.
func (k EdgeKey) String() string {
	return "(" + k.Source + ")-[" + k.Type + "#" + strconv.FormatInt(k.Rank, 10) + "]->(" + k.Target + ")"
}

// Less orders edge keys by their portable id.
func (k EdgeKey) Less(o EdgeKey) bool { return k.PortableID() < o.PortableID() }

// hashParts hashes NUL-joined parts, for derived operation ids.
func hashParts(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}

// IngestOperationID derives the default operationId of an ingestion request
// from the business intent: space, document, content hash and the revision
// it builds on (so re-ingesting the same content after a retraction is a new
// intent, while a resubmission after a crash finds its operation again).
func IngestOperationID(space, documentID, contentHash string, baseRevision int64) string {
	return "ingest-" + hashParts(space, documentID, contentHash, strconv.FormatInt(baseRevision, 10))[:32]
}

// RetractOperationID derives the operationId of a retraction of the given
// revision.
func RetractOperationID(space, documentID string, previousRevision int64) string {
	return "retract-" + hashParts(space, documentID, strconv.FormatInt(previousRevision, 10))[:32]
}

// ContentHash is the SHA-256 of a document's content.
func ContentHash(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}
