package history

import (
	"fmt"
	"strconv"

	"github.com/crashmatrix/crashmatrix/internal/strictjson"
	"github.com/crashmatrix/crashmatrix/reference"
)

// appendRecord appends r exactly as json.Marshal renders it (the same
// fields in the same order, the same omissions and string escapes; a
// test compares the two on every field). A worker process appends a few
// hundred records and then exits: encoding/json's reflection, whose
// per-type set-up every fresh process pays again, was most of what its
// history cost it. A graph batch's mutation is written by
// reference.AppendMutation, the same way.
func appendRecord(b []byte, r *Record) ([]byte, error) {
	b = append(b, `{"w":`...)
	b = strictjson.AppendString(b, r.Worker)
	b = append(b, `,"phase":`...)
	b = strconv.AppendInt(b, int64(r.Phase), 10)
	b = appendInt(b, `,"pid":`, int64(r.PID))
	b = append(b, `,"type":`...)
	b = strictjson.AppendString(b, string(r.Kind))
	b = appendInt(b, `,"at":`, r.At)
	if r.Event != nil {
		var err error
		if b, err = appendEvent(append(b, `,"ev":`...), r.Event); err != nil {
			return nil, err
		}
	}
	b = appendStr(b, `,"point":`, string(r.Point))
	if r.Fault != nil {
		t, err := r.Fault.MarshalText()
		if err != nil {
			return nil, fmt.Errorf("json: error calling MarshalText for type faults.Action: %w", err)
		}
		b = strictjson.AppendString(append(b, `,"fault":`...), string(t))
	}
	b = appendInt(b, `,"i":`, int64(r.Index))
	b = appendStr(b, `,"do":`, r.Do)
	b = appendStr(b, `,"op":`, r.Op)
	b = appendStr(b, `,"doc":`, r.Doc)
	b = appendStr(b, `,"thread":`, r.Thread)
	b = appendInt(b, `,"actions":`, int64(r.Actions))
	b = appendInt(b, `,"call":`, int64(r.Call))
	if o := r.Result; o != nil {
		b = append(b, `,"res":{`...)
		n := len(b)
		b = appendStr(b, `,"op":`, o.Op)
		b = appendStr(b, `,"outcome":`, o.Outcome)
		b = appendInt(b, `,"rev":`, o.Revision)
		b = appendStr(b, `,"status":`, o.Status)
		b = appendStr(b, `,"next":`, o.Next)
		b = appendInt(b, `,"plan":`, o.PlanID)
		b = appendInt(b, `,"rounds":`, int64(o.Rounds))
		b = appendBool(b, `,"quiet":`, o.Quiet)
		b = closeObject(b, n)
	}
	b = appendStr(b, `,"err":`, r.Err)
	b = appendStr(b, `,"reason":`, r.Reason)
	if o := r.Obs; o != nil {
		b = append(b, `,"obs":{"what":`...)
		b = strictjson.AppendString(b, string(o.What))
		b = appendStr(b, `,"do":`, o.Do)
		b = appendStr(b, `,"op":`, o.Op)
		b = appendStr(b, `,"doc":`, o.Doc)
		b = appendStr(b, `,"hash":`, o.ContentHash)
		b = appendInt(b, `,"base":`, o.Base)
		b = appendStr(b, `,"plan":`, o.Plan)
		if len(o.Items) > 0 {
			b = append(b, `,"items":[`...)
			for i, it := range o.Items {
				if i > 0 {
					b = append(b, ',')
				}
				b = strictjson.AppendString(b, it)
			}
			b = append(b, ']')
		}
		b = appendInt(b, `,"deleted":`, int64(o.Deleted))
		b = appendBool(b, `,"created":`, o.Created)
		b = appendInt(b, `,"expected":`, o.Expected)
		b = appendInt(b, `,"rev":`, o.Revision)
		b = appendStr(b, `,"status":`, o.Status)
		b = appendStr(b, `,"holder":`, o.Holder)
		b = appendBool(b, `,"granted":`, o.Granted)
		b = appendInt(b, `,"now":`, o.Now)
		b = appendInt(b, `,"until":`, o.Until)
		b = appendStr(b, `,"thread":`, o.Thread)
		b = appendStr(b, `,"owner":`, o.Owner)
		b = appendInt(b, `,"id":`, o.ID)
		b = appendStr(b, `,"err":`, o.Err)
		b = appendInt(b, `,"token":`, o.Token)
		b = appendInt(b, `,"stopped":`, o.Stopped)
		b = appendInt(b, `,"ttl":`, o.TTL)
		b = append(b, '}')
	}
	b = appendStr(b, `,"note":`, r.Note)
	b = appendStr(b, `,"method":`, r.Method)
	b = appendInt(b, `,"us":`, r.Micros)
	b = appendInt(b, `,"since":`, r.Since)
	b = appendInt(b, `,"calls":`, int64(r.Calls))
	b = appendInt(b, `,"commits":`, int64(r.Commits))
	return append(b, '}'), nil
}

func appendEvent(b []byte, e *reference.Event) ([]byte, error) {
	b = append(b, `{"kind":`...)
	b = strictjson.AppendString(b, e.Kind)
	b = appendStr(b, `,"op":`, e.OperationID)
	b = appendStr(b, `,"space":`, e.Space)
	b = appendStr(b, `,"doc":`, e.DocumentID)
	b = appendStr(b, `,"from":`, string(e.From))
	b = appendStr(b, `,"to":`, string(e.To))
	b = appendInt(b, `,"rev":`, e.Revision)
	b = appendInt(b, `,"expected":`, e.Expected)
	b = appendInt(b, `,"token":`, e.Token)
	b = appendStr(b, `,"holder":`, e.Holder)
	b = appendInt(b, `,"expiresAt":`, e.ExpiresAt)
	b = appendStr(b, `,"detail":`, e.Detail)
	if e.Batch != nil {
		b = reference.AppendMutation(append(b, `,"batch":`...), e.Batch)
	}
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, e.At, 10)
	return append(b, '}'), nil
}

// closeObject ends an object whose fields (each written with a leading
// comma, all of them omitempty) start at b[n:]: the first field's comma
// goes.
func closeObject(b []byte, n int) []byte {
	if len(b) > n {
		b = append(b[:n], b[n+1:]...)
	}
	return append(b, '}')
}

// appendInt, appendStr and appendBool append an omitempty field: nothing
// for the zero value.
func appendInt(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), v, 10)
}

func appendStr(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return strictjson.AppendString(append(b, key...), v)
}

func appendBool(b []byte, key string, v bool) []byte {
	if !v {
		return b
	}
	return append(append(b, key...), "true"...)
}
