// Replicas (docs/PROTOCOL.md, "Clients and replicas"): the transport's part
// in riding out a pathd replica that dies, restarts or drains behind
// HAProxy. Which requests may be sent again after a lost connection, the
// idempotency key every update carries, and a connection's graceful
// replacement on DRAINING or past Options.MaxConnAge. Kept apart from the
// request-typed calls (calls.go) so either can change alone.

package pathd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand"
	"time"

	"google.golang.org/protobuf/proto"
	pb "pathd.example/client/pathdpb"
)

// keyOf points at req's idempotency_key, or is nil for a request that has
// none (everything but the four updates).
func keyOf(req *pb.Request) *string {
	switch b := req.Body.(type) {
	case *pb.Request_UpdateCells:
		if b.UpdateCells != nil {
			return &b.UpdateCells.IdempotencyKey
		}
	case *pb.Request_CreateScene:
		if b.CreateScene != nil {
			return &b.CreateScene.IdempotencyKey
		}
	case *pb.Request_CreateInstance:
		if b.CreateInstance != nil {
			return &b.CreateInstance.IdempotencyKey
		}
	case *pb.Request_DropScene:
		if b.DropScene != nil {
			return &b.DropScene.IdempotencyKey
		}
	}
	return nil
}

// keyed returns req with an idempotency key: req itself when it is no
// update, already has one, or keys are off; otherwise a copy with a fresh
// key (128 random bits in hex), so the caller's message never carries a
// key into its next, different update.
func (c *Client) keyed(req *pb.Request) *pb.Request {
	if c.opts.NoIdempotencyKeys {
		return req
	}
	if k := keyOf(req); k == nil || *k != "" {
		return req
	}
	var bits [16]byte
	if _, err := rand.Read(bits[:]); err != nil {
		mrand.Read(bits[:]) // no kernel randomness: still unique enough per update
	}
	out := proto.Clone(req).(*pb.Request)
	*keyOf(out) = hex.EncodeToString(bits[:])
	return out
}

// resendable says whether req may be sent again after its connection was
// lost with the answer owed: a query (it changes nothing), or an update
// carrying an idempotency key (the change log applies a key once).
func resendable(req *pb.Request) bool {
	if k := keyOf(req); k != nil {
		return *k != ""
	}
	switch req.Body.(type) {
	case *pb.Request_Cancel, *pb.Request_Reload, *pb.Request_Watch, *pb.Request_Unwatch,
		*pb.Request_ReservePath, *pb.Request_ReleaseAgent:
		return false
	}
	return true
}

// retryableStatus: answers exchange sends again. OVERLOADED is counted
// apart (Overloaded, Retries).
func retryableStatus(st pb.Status) bool {
	return st == pb.Status_STALE_VERSION || st == pb.Status_UNAVAILABLE || st == pb.Status_DRAINING
}

// waitLost sleeps the next reconnect back-off (Options.ReconnectBackoff,
// doubling up to ReconnectBackoffMax) before a request that found no
// connection, or lost its own, goes again; it fails when that would pass
// the deadline or the context ends.
func (c *Client) waitLost(ctx context.Context, deadline time.Time, wait *time.Duration) error {
	return sleepBackoff(ctx, deadline, wait, c.opts.ReconnectBackoffMax)
}

// retire replaces cn gracefully (DRAINING, or older than MaxConnAge): the
// pool stops sending on it and dials its slot again (redial), its watches
// end with why (watch again to go on), and it closes once the answers still
// owed on it have arrived (readLoop).
func (cn *conn) retire(why error) {
	c := cn.cl
	c.mu.Lock()
	wasLive := cn.live
	cn.live = false
	cn.used = 0 // its slots count nowhere now; release ignores it
	closed := c.closed
	c.mu.Unlock()
	if !wasLive {
		return
	}
	c.retired.Add(1)
	cn.mu.Lock()
	cn.retiring = true
	var watches []*call
	for id, cl := range cn.calls {
		if cl.watch != nil {
			watches = append(watches, cl)
			delete(cn.calls, id)
		}
	}
	idle := len(cn.calls) == 0
	cn.mu.Unlock()
	for _, cl := range watches {
		cl.err = why
		cl.watch.push(nil, why)
		close(cl.done)
	}
	if !closed {
		go c.redial(cn.slot)
	}
	if idle {
		cn.fail(why)
	}
}

// closeIfDrained closes a retired connection once nothing is owed on it.
func (cn *conn) closeIfDrained() {
	cn.mu.Lock()
	done := cn.retiring && cn.dead == nil && len(cn.calls) == 0
	cn.mu.Unlock()
	if done {
		cn.fail(fmt.Errorf("%w: connection to %s replaced", ErrDisconnected, cn.cl.addr))
	}
}

// expire retires cn after about age (a tenth less at random, so a pool's
// connections made together are not all replaced together).
func (cn *conn) expire(age time.Duration) {
	age -= time.Duration(mrand.Int63n(int64(age/10) + 1))
	t := time.NewTimer(age)
	defer t.Stop()
	select {
	case <-cn.closed:
	case <-t.C:
		cn.retire(fmt.Errorf("%w: connection to %s older than Options.MaxConnAge (%v), replaced",
			ErrDisconnected, cn.cl.addr, cn.cl.opts.MaxConnAge))
	}
}

// Resent counts requests sent again after the connection carrying them
// was lost.
func (c *Client) Resent() uint64 { return c.resent.Load() }

// ReplicaRetries counts requests sent again after STALE_VERSION (BEHIND),
// UNAVAILABLE or DRAINING.
func (c *Client) ReplicaRetries() uint64 { return c.replicaRetries.Load() }

// Reconnects counts connections made again after one was lost or retired.
func (c *Client) Reconnects() uint64 { return c.redials.Load() }
