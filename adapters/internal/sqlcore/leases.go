package sqlcore

import (
	"context"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

const listLeases = `SELECT document_id, holder, token, expires_at FROM {leases} WHERE space = ? AND token > 0 ORDER BY document_id`

// ListLeases returns every lease row of a space: held, expired, or
// released (no holder, the last token kept), ordered by document. It lets
// `crashmatrix snapshot` put leases into a scenario's initial state
// (initial.LeaseLister).
func (p *Locks) ListLeases(ctx context.Context, space string) ([]reference.Lease, error) {
	if strings.TrimSpace(space) == "" {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	var out []reference.Lease
	err := p.db.Query(ctx, "locks.listLeases", "space "+space, func() { out = out[:0] }, func(r Row) error {
		l := reference.Lease{Space: space}
		if err := r.Scan(&l.DocumentID, &l.Holder, &l.Token, &l.ExpiresAt); err != nil {
			return err
		}
		out = append(out, l)
		return nil
	}, p.list, space)
	return out, err
}
