package serverfaults

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// pgMsg frames one PostgreSQL backend message.
func pgMsg(typ byte, body string) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

func complete(tag string) []byte { return pgMsg('C', tag+"\x00") }
func ready(status byte) []byte   { return pgMsg('Z', string(status)) }

func TestPgRepliesFindsTheReplyThatCompletesACommittedWrite(t *testing.T) {
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name   string
		stream []byte
		want   string // tag reported, "" for none
	}{
		{"autocommit update", cat(complete("UPDATE 1"), ready('I')), "UPDATE 1"},
		{"read only", cat(pgMsg('T', "xx"), pgMsg('D', "yy"), complete("SELECT 1"), ready('I')), ""},
		{"insert inside a transaction is not the commit", cat(complete("BEGIN"), ready('T'), complete("INSERT 0 1"), ready('T')), ""},
		{"the commit after a write", cat(complete("INSERT 0 1"), ready('T'), complete("COMMIT"), ready('I')), "COMMIT after INSERT 0 1"},
		{"a read-only transaction's commit", cat(complete("BEGIN"), ready('T'), complete("SELECT 1"), ready('T'), complete("COMMIT"), ready('I')), ""},
		{"rolled back", cat(complete("INSERT 0 1"), ready('E'), complete("ROLLBACK"), ready('I')), ""},
	} {
		// Every split of the stream into two chunks gives the same answer.
		for cut := 0; cut <= len(tc.stream); cut++ {
			var p pgReplies
			p.started = true
			got := p.feed(tc.stream[:cut])
			if got == "" {
				got = p.feed(tc.stream[cut:])
			}
			if !strings.HasPrefix(got, tc.want) || (tc.want == "" && got != "") {
				t.Fatalf("%s, split at %d: got %q, want %q", tc.name, cut, got, tc.want)
			}
		}
	}
}

// A fake server behind an embedded toxiproxy: each request line is
// answered with an autocommit UPDATE's reply. ack-lost lets the first
// request through, drops its reply and closes the connection, once; a new
// connection then works.
func TestAckLostDropsOneReplyAfterTheServerGotTheRequest(t *testing.T) {
	var served atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				buf := make([]byte, 64)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					served.Add(1)
					_, _ = c.Write(append(complete("UPDATE 1"), ready('I')...))
				}
			}(c)
		}
	}()
	api := newToxiproxy()
	p := toxiproxy.NewProxy(api, "t", "127.0.0.1:0", ln.Addr().String())
	if err := api.Collection.Add(p, true); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = api.Collection.Clear() }()
	fired := make(chan string, 1)
	id, _ := newLatch(func(d string) { fired <- d })
	defer dropLatch(id)
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(`{"name":"a","type":"` + ToxicAckLost + `","stream":"downstream","attributes":{"latch":"` + id + `","protocol":"postgres"}}`)); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("UPDATE\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(c); len(b) != 0 || err != nil {
		t.Fatalf("the reply came through (%d bytes, %v): want it dropped and the connection closed", len(b), err)
	}
	select {
	case d := <-fired:
		if !strings.Contains(d, "UPDATE 1") {
			t.Errorf("fired with %q", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the toxic never reported firing")
	}
	if served.Load() != 1 {
		t.Fatalf("server saw %d requests, want 1: the request must reach it", served.Load())
	}
	c2, err := net.Dial("tcp", p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c2.Write([]byte("UPDATE\n")); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 64)
	if n, err := io.ReadAtLeast(c2, reply, 6); err != nil || n < 6 {
		t.Fatalf("after firing once the proxy must pass replies: %d bytes, %v", n, err)
	}
}
