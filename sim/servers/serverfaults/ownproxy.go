package serverfaults

import (
	"fmt"

	"github.com/Shopify/toxiproxy/v2"

	"github.com/crashmatrix/crashmatrix/sim"
)

// A worker whose connections a partition may cut reaches the servers
// through proxies of its own (WorkerEndpoints): every link on them is
// that worker's, whenever it opened it, so a partition holds the
// connections the worker opens during it as well as those open at its
// window. The case's other workers keep the case's proxies, which a
// partition never cuts.

// WorkerEndpoints implements sim.WorkerEndpoints: the endpoints of
// worker's own proxies, one per server (made at the first call), and the
// case's control URL.
func (c *caseServers) WorkerEndpoints(worker string) (map[string]string, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	ps := c.own[worker]
	if ps == nil {
		ps = map[string]*toxiproxy.Proxy{}
		for name, srv := range c.s.servers {
			p := toxiproxy.NewProxy(c.s.proxy, fmt.Sprintf("%s-%s-%s", c.key, worker, name), "127.0.0.1:0", srv.Addr)
			if err := c.s.proxy.Collection.Add(p, true); err != nil {
				for _, q := range ps {
					_ = c.s.proxy.Collection.Remove(q.Name)
				}
				return nil, fmt.Errorf("fault proxy of worker %s for %s of case %s: %w", worker, name, c.sc.ID, err)
			}
			ps[name] = p
		}
		c.own[worker] = ps
	}
	out := map[string]string{sim.EndpointControl: c.s.ctrlURL + "/case/" + c.key}
	for name, p := range ps {
		out[name] = p.Listen
	}
	return out, nil
}

// ownProxy is worker's own proxy for server, if it has one.
func (c *caseServers) ownProxy(worker, server string) *toxiproxy.Proxy {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.own[worker][server]
}

var _ sim.WorkerEndpoints = (*caseServers)(nil)
