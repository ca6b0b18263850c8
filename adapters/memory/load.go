package memory

import (
	"context"
	"fmt"
	"sort"

	"github.com/crashmatrix/crashmatrix/reference"
)

// ListLeases returns every lease of a space ordered by document: held or
// expired, and released ones (no holder) with their last token. It lets
// `crashmatrix snapshot` put leases into a scenario's initial state
// (initial.LeaseLister).
func (p *Locks) ListLeases(ctx context.Context, space string) ([]reference.Lease, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []reference.Lease
	for k, tok := range p.tokens {
		if k.space != space {
			continue
		}
		l, held := p.leases[k]
		if !held {
			l = reference.Lease{Space: space, DocumentID: k.doc, Token: tok}
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DocumentID < out[j].DocumentID })
	return out, nil
}
