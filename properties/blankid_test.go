package properties_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
)

// blankIsInvalid follows reference/stores.go's convention to the letter:
// a blank operationId is ErrInvalidArgument, for reads too.
type blankIsInvalid struct{ reference.OperationStore }

func (s blankIsInvalid) Get(ctx context.Context, id string) (reference.Operation, error) {
	if strings.TrimSpace(id) == "" {
		return reference.Operation{}, fmt.Errorf("%w: operationId is blank", reference.ErrInvalidArgument)
	}
	return s.OperationStore.Get(ctx, id)
}

func (s blankIsInvalid) GetPlan(ctx context.Context, id string) (reference.Plan, error) {
	if strings.TrimSpace(id) == "" {
		return reference.Plan{}, fmt.Errorf("%w: operationId is blank", reference.ErrInvalidArgument)
	}
	return s.OperationStore.GetPlan(ctx, id)
}

// A store that answers a blank operationId with ErrInvalidArgument, as the
// documented convention says, passes the operation store's suite (it
// failed "after a rejected create, Get(\"\") … want ErrNotFound" for a
// store written from the docs alone).
func TestBlankOperationIDMayBeInvalidArgument(t *testing.T) {
	failed := properties.StoresFailures(func(test, dir string) (reference.Stores, error) {
		st, err := sqlite.Open(filepath.Join(dir, "store.db"), sqlite.Options{})
		if err != nil {
			return st, err
		}
		st.Ops = blankIsInvalid{st.Ops}
		return st, nil
	})
	for path, msg := range failed {
		if strings.HasPrefix(path, "OperationStore") {
			t.Errorf("%s: %s", path, msg)
		}
	}
}
