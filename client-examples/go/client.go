// Package pathd is a Go client for the pathd pathfinding daemon
// (docs/PROTOCOL.md): a pool of connections with flow control, so the client
// never overloads pathd by itself.
//
// Flow control, as HTTP/2 clients respect MAX_CONCURRENT_STREAMS: each
// connection reads GetLimits when it connects and keeps at most its
// max_inflight_per_conn slots taken by requests sent and not yet answered,
// counting a Batch's items one slot each as the server does (kinds the
// server does not count, such as Ping or GetSceneInfo, take none). A request
// that finds every connection full waits in one bounded FIFO queue for the
// first connection with room; past Options.QueueLimit waiting requests a call
// fails at once with ErrQueueFull. An OVERLOADED the server still answers
// (its job queue, shared with other clients, was full) is retried with
// jittered exponential backoff until the context's deadline (or
// Options.RetryTimeout).
//
// Every call takes a context: its deadline bounds the wait for a slot, the
// answer and the retries; cancelling it returns ctx.Err() at once and sends
// pathd a Cancel for a request already in flight (its slot stays counted
// until the server's answer to it arrives, as the server counts it).
//
// A Client is safe for concurrent use. A lost connection is dialled again
// in the background, with jittered back-off from Options.ReconnectBackoff.
//
// Replicas (several pathd behind HAProxy; docs/PROTOCOL.md, "Clients and
// replicas"), all within the call's deadline (or RetryTimeout):
//   - A call that finds no connection up waits for one (ReconnectBackoff
//     doubling to ReconnectBackoffMax between looks); a request lost with
//     its connection is sent again when that is safe: a query always, an
//     update (UpdateCells, CreateScene, CreateInstance, DropScene) when it
//     carries an idempotency_key. Reservations made or released, watches,
//     cancels and reloads fail with ErrDisconnected. Options.NoResend:
//     every lost request fails with ErrDisconnected (the old behaviour).
//   - Every update gets a fresh key (128 random bits in hex) unless it has
//     one, on a copy of the caller's message (Options.NoIdempotencyKeys:
//     none); the change log applies one key once however often it arrives.
//   - STALE_VERSION (BEHIND) and UNAVAILABLE are retried with jittered
//     back-off, as OVERLOADED is, with the same key, at most
//     Options.ReplicaRetries times.
//   - DRAINING (unsolicited with id 0, or as an answer) and a connection
//     older than Options.MaxConnAge (10 minutes; negative: never) retire
//     it: the pool stops sending on it and dials its slot again (after
//     one jittered ReconnectBackoff), a refused request goes again on
//     another connection, and the old one closes once the answers owed on
//     it have arrived. Its watches end with an error wrapping
//     ErrDisconnected: watch again to go on.
//   - A new connection whose first answer (Auth with a token, else
//     GetLimits) is DRAINING, or that is told DRAINING (id 0) before the
//     pool counts it, reached a draining replica: it is closed and
//     counts as a connection that could not be made, so Dial and the
//     redial loop connect again after the reconnect back-off above (never
//     at once, so the draining replica is not hammered) until one is
//     served; Dial within its context's deadline (or
//     Options.DialRetryTimeout), then failing with an error that says
//     DRAINING (IsStatus(err, pb.Status_DRAINING)).
package pathd

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"time"

	pb "pathd.example/client/pathdpb"
)

// Options configure a Client; zero fields take the defaults below.
type Options struct {
	// Conns is the number of connections requests are spread over (2).
	Conns int
	// QueueLimit is how many requests may wait locally for an in-flight
	// slot before calls fail with ErrQueueFull (1024).
	QueueLimit int
	// InflightCap lowers each connection's cap below the server's
	// max_inflight_per_conn (0: the server's).
	InflightCap int
	// Token is sent as Auth first on every connection (empty: none).
	Token string
	// DialTimeout bounds connecting, Auth and GetLimits (5 s), for each
	// connection tried.
	DialTimeout time.Duration
	// DialRetryTimeout bounds how long Dial keeps connecting again while
	// pathd answers DRAINING, when Dial's context has no deadline
	// (RetryTimeout, 5 s); a context's deadline bounds it otherwise.
	DialRetryTimeout time.Duration
	// WriteTimeout bounds writing one frame (5 s).
	WriteTimeout time.Duration
	// RetryTimeout bounds OVERLOADED retries when the context has no
	// deadline (5 s).
	RetryTimeout time.Duration
	// RetryBackoff is the first back-off after OVERLOADED (10 ms); it
	// doubles per attempt up to RetryBackoffMax (500 ms), each wait drawn
	// at random from its upper half.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// MaxFrameBytes refuses an incoming frame above it (16 MiB).
	MaxFrameBytes int
	// WatchBuffer is how many events a Watch holds unread before it ends
	// it with WATCH_OVERFLOW, as the server does to a watcher that does not
	// read (4096).
	WatchBuffer int
	// Replicas (see the package notes). ReconnectBackoff is the first wait
	// before dialling a lost connection again, and before a request that
	// found none (or lost its own) looks again (50 ms); it doubles up to
	// ReconnectBackoffMax (2 s), each wait drawn from its upper half.
	ReconnectBackoff    time.Duration
	ReconnectBackoffMax time.Duration
	// MaxConnAge retires a connection older than it (10 min; negative:
	// never), since HAProxy never moves one back to a restarted replica.
	MaxConnAge time.Duration
	// ReplicaRetries is how many times one call sends its request again
	// after STALE_VERSION (BEHIND), UNAVAILABLE or DRAINING (5), so a
	// version that never comes is reported within about a second rather
	// than at the deadline.
	ReplicaRetries int
	// NoResend fails a request lost with its connection with
	// ErrDisconnected instead of sending it again.
	NoResend bool
	// NoIdempotencyKeys sends updates without a key unless the caller set
	// one (such an update is then never sent again).
	NoIdempotencyKeys bool
}

func (o *Options) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Conns, 2)
	def(&o.QueueLimit, 1024)
	def(&o.MaxFrameBytes, 16<<20)
	def(&o.WatchBuffer, 4096)
	def(&o.ReplicaRetries, 5)
	defd(&o.DialTimeout, 5*time.Second)
	defd(&o.WriteTimeout, 5*time.Second)
	defd(&o.RetryTimeout, 5*time.Second)
	defd(&o.DialRetryTimeout, o.RetryTimeout)
	defd(&o.RetryBackoff, 10*time.Millisecond)
	defd(&o.RetryBackoffMax, 500*time.Millisecond)
	defd(&o.ReconnectBackoff, 50*time.Millisecond)
	defd(&o.ReconnectBackoffMax, 2*time.Second)
	if o.MaxConnAge == 0 {
		o.MaxConnAge = 10 * time.Minute
	}
}

// waiter is a request queued for in-flight slots.
type waiter struct {
	weight int
	ch     chan *conn // the connection granted, or nil with err set
	err    error
}

// Client is a pool of connections to one pathd.
type Client struct {
	addr string
	opts Options

	nextID         atomic.Uint64
	overloaded     atomic.Uint64 // OVERLOADED answers received (requests and batch items)
	retries        atomic.Uint64
	redials        atomic.Uint64 // connections made again after one was lost
	resent         atomic.Uint64 // requests sent again after a lost connection
	replicaRetries atomic.Uint64 // STALE_VERSION, UNAVAILABLE, DRAINING retried
	retired        atomic.Uint64 // connections retired (DRAINING, MaxConnAge)

	mu      sync.Mutex
	conns   []*conn // one per slot; nil until dialled
	waiters []*waiter
	closed  bool
	lastErr error
	limits  *pb.Limits
	stop    chan struct{} // closed by Close: ends the redial loops
}

// Dial connects Options.Conns connections to addr (HOST:PORT), each
// authenticating with Options.Token when given and reading GetLimits. It
// fails unless every connection is made, but not at the first DRAINING: a
// draining pathd (SIGUSR1, or a replica HAProxy is taking out) answers Auth
// and GetLimits DRAINING, and then Dial closes that connection and
// connects again after the reconnect back-off (ReconnectBackoff doubling
// to ReconnectBackoffMax, each wait drawn from its upper half), so it
// neither fails while a balancer has another replica to give nor hammers
// the draining one. Once a DRAINING was seen a connection that cannot be
// made is tried again the same way (the replica may be restarting); before
// that, one fails Dial at once (nothing listens at addr). Dial gives up
// when its context ends or the next wait would pass its deadline
// (Options.DialRetryTimeout from now when the context has none), with an
// error that says DRAINING and carries the status (IsStatus(err,
// pb.Status_DRAINING)). Each try is bounded by Options.DialTimeout too,
// and once a DRAINING was seen by that deadline.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	opts.defaults()
	c := &Client{addr: addr, opts: opts, conns: make([]*conn, opts.Conns), stop: make(chan struct{})}
	deadline, ok := ctx.Deadline()
	if !ok {
		// Bounds the waits, and the tries once a DRAINING was seen (before,
		// each try keeps only its DialTimeout).
		deadline = time.Now().Add(opts.DialRetryTimeout)
	}
	wait := opts.ReconnectBackoff
	var drained error // the last DRAINING refusal, once there was one
	refused := 0
	for i := 0; i < opts.Conns; {
		// After a DRAINING the deadline bounds the tries too, not only the
		// waits: else the last try could run a whole DialTimeout past it.
		tryCtx, cancelTry := ctx, context.CancelFunc(func() {})
		if drained != nil {
			tryCtx, cancelTry = context.WithDeadline(ctx, deadline)
		}
		err := c.connect(tryCtx, i)
		cancelTry()
		if err == nil {
			i++
			wait = opts.ReconnectBackoff // served: the steps start over
			continue
		}
		if IsStatus(err, pb.Status_DRAINING) {
			drained = err
			refused++
		} else if drained == nil || !(errors.Is(err, ErrDisconnected) || errors.Is(err, context.DeadlineExceeded) ||
			errors.Is(err, context.Canceled)) {
			// Nothing listens, a status other than DRAINING (a token
			// refused), a protocol error: retrying will not help.
			c.Close()
			return nil, err
		}
		// A connection lost or timed out after a DRAINING: tried again,
		// unless Dial's own context has ended (the wait below fails).
		if sleepBackoff(ctx, deadline, &wait, opts.ReconnectBackoffMax) != nil {
			c.Close()
			why := "the next wait would pass it"
			if ctx.Err() != nil {
				why = ctx.Err().Error()
			}
			if err != drained { // the replica went on to refuse the connection itself
				why += "; the last try: " + err.Error()
			}
			return nil, &dialGaveUp{
				msg: fmt.Sprintf("pathd: dialling %s: %d new connection(s) answered DRAINING (a draining pathd), "+
					"none served before Dial's deadline (%s): %v", addr, refused, why, drained),
				drained: drained, ctxErr: ctx.Err(),
			}
		}
	}
	return c, nil
}

// dialGaveUp is Dial's error when no connection was served before its
// deadline, a draining pathd having refused them: it carries the DRAINING
// status (IsStatus), is ErrDisconnected (none could be made within the
// deadline, as for a lost connection) and, when the context ended it,
// that context's error. (Go 1.19's fmt.Errorf wraps only one error.)
type dialGaveUp struct {
	msg     string
	drained error // the last DRAINING refusal
	ctxErr  error // ctx.Err() when the context ended it, else nil
}

func (e *dialGaveUp) Error() string { return e.msg }
func (e *dialGaveUp) Unwrap() error { return e.drained }
func (e *dialGaveUp) Is(target error) bool {
	return target == ErrDisconnected || (e.ctxErr != nil && target == e.ctxErr)
}

// Limits returns the server's limits as the last connection made read them.
func (c *Client) Limits() *pb.Limits {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limits
}

// Overloaded counts the OVERLOADED answers the server sent this client (a
// whole request, or a Batch item), retried or not.
func (c *Client) Overloaded() uint64 { return c.overloaded.Load() }

// Retries counts the requests sent again after OVERLOADED.
func (c *Client) Retries() uint64 { return c.retries.Load() }

// InFlight returns the slots taken on all connections and the requests
// waiting for one.
func (c *Client) InFlight() (slots, queued int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cn := range c.conns {
		if cn != nil && cn.live {
			slots += cn.used
		}
	}
	return slots, len(c.waiters)
}

// Close closes every connection; requests waiting fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.stop)
	conns := append([]*conn(nil), c.conns...)
	c.failWaitersLocked(ErrClosed)
	c.mu.Unlock()
	for _, cn := range conns {
		if cn != nil {
			cn.fail(ErrClosed)
		}
	}
	return nil
}

// connect dials slot i: Auth when a token is set, then GetLimits for its
// cap; only then does the pool count it.
func (c *Client) connect(ctx context.Context, slot int) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return fmt.Errorf("%w: connecting to %s: %v", ErrDisconnected, c.addr, err)
	}
	cn := newConn(c, slot, nc)
	go cn.readLoop()
	if c.opts.Token != "" {
		r, err := c.send(ctx, cn, &pb.Request{Body: &pb.Request_Auth{Auth: &pb.Auth{Token: c.opts.Token}}}, 0, nil, nil)
		if err == nil && r.Status != pb.Status_OK {
			err = statusError(r)
		}
		if err != nil {
			cn.fail(ErrClosed)
			return fmt.Errorf("pathd: authenticating to %s: %w", c.addr, err)
		}
	}
	r, err := c.send(ctx, cn, &pb.Request{Body: &pb.Request_Limits{Limits: &pb.GetLimits{}}}, 0, nil, nil)
	if err == nil && r.GetLimits() == nil {
		err = statusError(r)
	}
	if err != nil {
		cn.fail(ErrClosed)
		return fmt.Errorf("pathd: reading the limits of %s: %w", c.addr, err)
	}
	lim := r.GetLimits()
	cn.cap = c.capOf(lim)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		go cn.fail(ErrClosed)
		return ErrClosed
	}
	cn.mu.Lock()
	alive, drained := cn.dead == nil, cn.drainSeen
	cn.mu.Unlock()
	if !alive {
		return fmt.Errorf("%w: %s closed the connection while it was set up", ErrDisconnected, c.addr)
	}
	if drained {
		// DRAINING (id 0) came while the connection was set up (retire
		// ignored it: not counted yet). A refusal like a DRAINING answer.
		go cn.fail(ErrClosed) // connLost takes c.mu, held here
		return fmt.Errorf("pathd: %s began draining while the connection was set up: %w", c.addr,
			&StatusError{Status: pb.Status_DRAINING, Message: "DRAINING (id 0) right after GetLimits"})
	}
	cn.live = true
	c.conns[slot] = cn
	if lim.IdleTimeoutMs > 0 {
		go cn.keepalive(time.Duration(lim.IdleTimeoutMs) * time.Millisecond / 3)
	}
	if c.opts.MaxConnAge > 0 {
		go cn.expire(c.opts.MaxConnAge)
	}
	c.limits = lim
	c.dispatchLocked()
	return nil
}

// connLost stops counting cn and dials its slot again.
func (c *Client) connLost(cn *conn, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !cn.live {
		return
	}
	cn.live = false
	cn.used = 0
	c.lastErr = err
	if c.closed {
		return
	}
	if c.liveLocked() == 0 {
		c.failWaitersLocked(fmt.Errorf("%w: no connection to %s (%v)", ErrDisconnected, c.addr, err))
	}
	go c.redial(cn.slot)
}

// redial connects slot again, backing off from ReconnectBackoff to
// ReconnectBackoffMax, each wait drawn from its upper half, before every
// try (the first too, a retire's included, so the slots of a pool that
// were retired together do not dial in step). A connection refused
// DRAINING (connect's Auth or GetLimits) is a failed try like one that
// cannot be made: the next waits the doubled step, so a draining replica
// gets one connection per step until it serves again or the Client is
// closed (TestDrainRedialBacksOff).
func (c *Client) redial(slot int) {
	// Close ends a try in progress too: without this a connection being
	// set up when the Client closed stayed open until DialTimeout
	// (TestCloseEndsARedialInProgress).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := c.opts.ReconnectBackoff
	for {
		select {
		case <-c.stop:
			return
		case <-time.After(jitter(wait)):
		}
		if err := c.connect(ctx, slot); err == nil {
			c.redials.Add(1)
			return
		} else {
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
		}
		if wait *= 2; wait > c.opts.ReconnectBackoffMax {
			wait = c.opts.ReconnectBackoffMax
		}
	}
}

func (c *Client) liveLocked() int {
	n := 0
	for _, cn := range c.conns {
		if cn != nil && cn.live {
			n++
		}
	}
	return n
}

// roomiest returns the live connection with the most free slots (nil when
// none is live).
func (c *Client) roomiest() *conn {
	var best *conn
	for _, cn := range c.conns {
		if cn != nil && cn.live && (best == nil || cn.cap-cn.used > best.cap-best.used) {
			best = cn
		}
	}
	return best
}

// acquire takes weight slots on one connection, waiting in the queue when
// none has room.
func (c *Client) acquire(ctx context.Context, weight int) (*conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	best := c.roomiest()
	if best == nil {
		err := fmt.Errorf("%w: no connection to %s (%v)", ErrDisconnected, c.addr, c.lastErr)
		c.mu.Unlock()
		return nil, err
	}
	if weight == 0 {
		c.mu.Unlock()
		return best, nil
	}
	maxCap := 0
	for _, cn := range c.conns {
		if cn != nil && cn.live && cn.cap > maxCap {
			maxCap = cn.cap
		}
	}
	if weight > maxCap {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %d items, cap %d (split the batch)", ErrTooLarge, weight, maxCap)
	}
	// FIFO: nothing overtakes a request already waiting.
	if len(c.waiters) == 0 && best.cap-best.used >= weight {
		best.used += weight
		c.mu.Unlock()
		return best, nil
	}
	if len(c.waiters) >= c.opts.QueueLimit {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %d requests wait for the in-flight cap of %d connection(s) (Options.QueueLimit)",
			ErrQueueFull, len(c.waiters), c.liveLocked())
	}
	w := &waiter{weight: weight, ch: make(chan *conn, 1)}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()

	select {
	case cn := <-w.ch:
		if cn == nil {
			return nil, w.err
		}
		return cn, nil
	case <-ctx.Done():
		c.mu.Lock()
		for i, x := range c.waiters {
			if x == w {
				c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
				c.dispatchLocked() // a smaller request behind it may fit now
				c.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		c.mu.Unlock()
		// Granted meanwhile: hand the slots back.
		if cn := <-w.ch; cn != nil {
			c.release(cn, weight)
		}
		return nil, ctx.Err()
	}
}

// release frees slots after a request's final answer and wakes the queue.
func (c *Client) release(cn *conn, weight int) {
	c.mu.Lock()
	if cn.live {
		cn.used -= weight
	}
	c.dispatchLocked()
	c.mu.Unlock()
}

// dispatchLocked grants slots to queued requests in order while the head
// fits on some connection.
func (c *Client) dispatchLocked() {
	for len(c.waiters) > 0 {
		w := c.waiters[0]
		best := c.roomiest()
		if best == nil || best.cap-best.used < w.weight {
			return
		}
		best.used += w.weight
		c.waiters = c.waiters[1:]
		w.ch <- best
	}
}

func (c *Client) failWaitersLocked(err error) {
	for _, w := range c.waiters {
		w.err = err
		w.ch <- nil
	}
	c.waiters = nil
}

// weightOf is the in-flight slots the server counts for req.
func weightOf(req *pb.Request) int {
	switch b := req.Body.(type) {
	case *pb.Request_Batch:
		return len(b.Batch.GetItems())
	case *pb.Request_FindPath, *pb.Request_FindRoute, *pb.Request_UpdateCells,
		*pb.Request_CreateScene, *pb.Request_CreateInstance, *pb.Request_DropScene,
		*pb.Request_Raycast, *pb.Request_ValidateMove, *pb.Request_MoveAlong,
		*pb.Request_Nearest, *pb.Request_Reachable, *pb.Request_RandomPoint,
		*pb.Request_DistanceToWall, *pb.Request_ReservePath, *pb.Request_ReleaseAgent,
		*pb.Request_Reservations:
		return 1
	}
	return 0
}

// send sends req on cn (its slots already taken) and waits for the final
// frame; req gets a fresh id unless it has one. A cancelled context returns at once; a request the server counts
// is then cancelled on the server too, and its slots stay taken until the
// server's answer comes back.
func (c *Client) send(ctx context.Context, cn *conn, req *pb.Request, weight int, asm assembler, w *Watch) (*pb.Response, error) {
	if req.Id == 0 {
		req.Id = c.nextID.Add(1)
	}
	cl := &call{id: req.Id, weight: weight, asm: asm, watch: w, done: make(chan struct{})}
	if err := cn.start(cl, req); err != nil {
		return nil, err
	}
	select {
	case <-cl.done:
		if cl.err != nil {
			return nil, cl.err
		}
		return cl.final, nil
	case <-ctx.Done():
		if weight > 0 {
			go c.cancelOnServer(cn, req.Id)
		}
		return nil, ctx.Err()
	}
}

// cancelOnServer sends Cancel{target}; its acknowledgement is read and
// dropped. The target's own answer (CANCELLED, or its result) frees its slots.
func (c *Client) cancelOnServer(cn *conn, target uint64) {
	req := &pb.Request{Id: c.nextID.Add(1), Body: &pb.Request_Cancel{Cancel: &pb.Cancel{TargetId: target}}}
	_ = cn.start(&call{id: req.Id, done: make(chan struct{})}, req)
}

// exchange sends req and returns its final frame, retrying OVERLOADED,
// STALE_VERSION, UNAVAILABLE and DRAINING with jittered exponential backoff
// until the context's deadline (or RetryTimeout), waiting for a connection
// when none is up and sending req again when its connection was lost and
// that is safe (replicas.go). newAsm makes a fresh assembler per attempt
// (nil for one-frame answers).
func (c *Client) exchange(ctx context.Context, req *pb.Request, newAsm func() assembler) (*pb.Response, assembler, error) {
	req = c.keyed(req)
	weight := weightOf(req)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.opts.RetryTimeout)
	}
	backoff := c.opts.RetryBackoff
	lostWait := c.opts.ReconnectBackoff
	drained := false
	replicaRetries := 0
	// The connection error being waited out: a deadline that passes while
	// waiting (a late timer on a loaded machine) says why there was no
	// connection, as a wait that would pass it does, not only that time ran out.
	var lost error
	for {
		if err := ctx.Err(); err != nil {
			if lost != nil {
				return nil, nil, lost
			}
			return nil, nil, err
		}
		cn, err := c.acquire(ctx, weight)
		if err != nil {
			// Not sent: waiting for a connection is always safe.
			if errors.Is(err, ErrDisconnected) && c.waitLost(ctx, deadline, &lostWait) == nil {
				lost = err
				continue
			}
			return nil, nil, err
		}
		lost = nil
		var asm assembler
		if newAsm != nil {
			asm = newAsm()
		}
		req.Id = 0 // a fresh id per attempt
		r, err := c.send(ctx, cn, req, weight, asm, nil)
		if err != nil {
			if errors.Is(err, ErrDisconnected) && !c.opts.NoResend && resendable(req) &&
				c.waitLost(ctx, deadline, &lostWait) == nil {
				c.resent.Add(1)
				lost = err
				continue
			}
			return nil, nil, err
		}
		if retryableStatus(r.Status) && replicaRetries < c.opts.ReplicaRetries {
			replicaRetries++
			if r.Status == pb.Status_DRAINING {
				cn.retire(fmt.Errorf("%w: %s is draining", ErrDisconnected, c.addr))
			}
			// DRAINING goes again at once on another connection; BEHIND,
			// UNAVAILABLE and a second DRAINING after a pause.
			if r.Status != pb.Status_DRAINING || drained {
				if err := c.backoff(ctx, deadline, &backoff); err != nil {
					return r, asm, nil // the caller reports the status
				}
			}
			drained = drained || r.Status == pb.Status_DRAINING
			c.replicaRetries.Add(1)
			continue
		}
		if r.Status != pb.Status_OVERLOADED {
			return r, asm, nil
		}
		c.overloaded.Add(1)
		// A reload may have lowered the server's cap: read it again.
		go c.refreshLimits(cn)
		if err := c.backoff(ctx, deadline, &backoff); err != nil {
			return r, asm, statusError(r)
		}
		c.retries.Add(1)
	}
}

// refreshLimits reads GetLimits on cn again and takes its cap (at most one
// refresh per connection at a time).
func (c *Client) refreshLimits(cn *conn) {
	if !cn.refreshing.CompareAndSwap(false, true) {
		return
	}
	defer cn.refreshing.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.DialTimeout)
	defer cancel()
	r, err := c.send(ctx, cn, &pb.Request{Body: &pb.Request_Limits{Limits: &pb.GetLimits{}}}, 0, nil, nil)
	if err != nil || r.GetLimits() == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cn.live {
		cn.cap = c.capOf(r.GetLimits())
		c.limits = r.GetLimits()
		c.dispatchLocked()
	}
}

// capOf is a connection's cap under the server's limits.
func (c *Client) capOf(lim *pb.Limits) int {
	n := int(lim.MaxInflightPerConn)
	if c.opts.InflightCap > 0 && c.opts.InflightCap < n {
		n = c.opts.InflightCap
	}
	if n < 1 {
		n = 1
	}
	return n
}

// backoff sleeps the next jittered back-off, or fails when that would pass
// the deadline or the context ends.
func (c *Client) backoff(ctx context.Context, deadline time.Time, backoff *time.Duration) error {
	return sleepBackoff(ctx, deadline, backoff, c.opts.RetryBackoffMax)
}

// sleepBackoff sleeps jitter(*backoff) and doubles *backoff up to max; it
// fails when the sleep would pass the deadline or the context ends.
func sleepBackoff(ctx context.Context, deadline time.Time, backoff *time.Duration, max time.Duration) error {
	d := jitter(*backoff)
	if *backoff *= 2; *backoff > max {
		*backoff = max
	}
	if time.Now().Add(d).After(deadline) {
		return context.DeadlineExceeded
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// jitter draws a wait from [d/2, d), so clients that were refused together
// do not come back together.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + time.Duration(rand.Int63n(int64(d/2)))
}
