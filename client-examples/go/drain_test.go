// Tests of a client against a draining pathd (SIGUSR1 until SIGUSR2;
// docs/PROTOCOL.md, "Clients and replicas"): Dial and the redial loop keep
// connecting with the reconnect back-off while the first answer on every
// new connection (Auth with a token, else GetLimits) is DRAINING, and are
// served once pathd serves again. A fake server refuses exact counts of
// connections; a live pathd is drained and made ready with the signals,
// behind a proxy that counts the connections made. Nothing asserts a wall-
// clock upper bound: the back-off is checked by its floors (each jittered
// wait is at least half its step) and the connections made are bounded by
// how many the floors allow in the time that passed.

package pathd

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "pathd.example/client/pathdpb"
)

// drainFake is a fake pathd that refuses new connections as a draining
// pathd does: their Auth and GetLimits are answered DRAINING (the
// connection stays open; the client is to give it up). It refuses the
// first refuseFirst connections, and every connection made while draining
// is set (drain, ready). Served connections get their limits and a Pong.
type drainFake struct {
	addr string

	mu          sync.Mutex
	refuseFirst int
	hangUp      map[int]bool // connections closed at once, unanswered
	silentFrom  int          // connections from this one on are read and never answered (0: none)
	draining    bool
	conns       []net.Conn
	accepted    []time.Time // when each connection was accepted
	refusedAt   []time.Time // when its refusal was written (zero: served)
	firsts      []string    // the kind of each connection's first request
	limitsAsked []bool      // whether it was sent GetLimits
	closed      []bool      // whether the client closed it
}

func newDrainFake(t *testing.T, refuseFirst int) *drainFake {
	t.Helper()
	f := &drainFake{refuseFirst: refuseFirst}
	f.addr = listenFake(t, func(nc net.Conn) {
		f.mu.Lock()
		defer f.mu.Unlock()
		i := len(f.conns)
		f.conns = append(f.conns, nc)
		f.accepted = append(f.accepted, time.Now())
		f.refusedAt = append(f.refusedAt, time.Time{})
		f.firsts = append(f.firsts, "")
		f.limitsAsked = append(f.limitsAsked, false)
		f.closed = append(f.closed, false)
		if f.hangUp[i] {
			nc.Close()
			return
		}
		if f.silentFrom > 0 && i >= f.silentFrom {
			go func() { _, _ = io.Copy(io.Discard, nc) }()
			return
		}
		go f.serve(i, nc, i < f.refuseFirst || f.draining)
	})
	return f
}

func (f *drainFake) serve(i int, nc net.Conn, refuse bool) {
	closed := func() {
		f.mu.Lock()
		f.closed[i] = true
		f.mu.Unlock()
	}
	readRequests(nc, closed, func(req *pb.Request) bool {
		f.mu.Lock()
		if f.firsts[i] == "" {
			f.firsts[i] = kindOf(req)
		}
		if req.GetLimits() != nil {
			f.limitsAsked[i] = true
		}
		f.mu.Unlock()
		var out *pb.Response
		switch {
		case req.GetPing() != nil: // answered in every state, as pathd does
			out = pongTo(req)
		case refuse:
			out = refusal(req, pb.Status_DRAINING, 0)
		case req.GetLimits() != nil:
			out = limitsTo(req, 8)
		case req.GetAuth() != nil:
			out = &pb.Response{Id: req.Id, Final: true, Body: &pb.Response_Auth{Auth: &pb.AuthResult{Role: "query"}}}
		default:
			out = refusal(req, pb.Status_INVALID_ARGUMENT, 0)
		}
		// The refusal's time is taken before it is written: the client
		// cannot read it sooner, whereas a time taken after the write can
		// lag it by however long this goroutine waits for a CPU (checkGaps
		// would then blame the client for the server's delay).
		if refuse {
			f.mu.Lock()
			if f.refusedAt[i].IsZero() {
				f.refusedAt[i] = time.Now()
			}
			f.mu.Unlock()
		}
		// (Writes on a net.Conn are safe from several goroutines: drain
		// writes here too.)
		return rawWrite(nc, out) == nil
	})
}

func kindOf(req *pb.Request) string {
	switch {
	case req.GetAuth() != nil:
		return "auth"
	case req.GetLimits() != nil:
		return "limits"
	}
	return "other"
}

// drain refuses every connection made from now on and tells the open ones
// DRAINING (id 0), as SIGUSR1 does; ready serves new ones again (SIGUSR2).
func (f *drainFake) drain() {
	f.mu.Lock()
	f.draining = true
	conns := append([]net.Conn(nil), f.conns...)
	f.mu.Unlock()
	for _, nc := range conns {
		_ = rawWrite(nc, &pb.Response{Id: 0, Final: true, Status: pb.Status_DRAINING})
	}
}

func (f *drainFake) ready() {
	f.mu.Lock()
	f.draining = false
	f.mu.Unlock()
}

func (f *drainFake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

type drainSnapshot struct {
	accepted, refusedAt []time.Time
	firsts              []string
	limitsAsked, closed []bool
}

func (f *drainFake) snapshot() drainSnapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return drainSnapshot{append([]time.Time(nil), f.accepted...), append([]time.Time(nil), f.refusedAt...),
		append([]string(nil), f.firsts...), append([]bool(nil), f.limitsAsked...), append([]bool(nil), f.closed...)}
}

// backoffFloor is the least the k-th reconnect wait (0-based) can last:
// its step (first, doubling up to max) is jittered within [step/2, step).
func backoffFloor(k int, first, max time.Duration) time.Duration {
	step := first
	for ; k > 0 && step < max; k-- {
		step *= 2
	}
	if step > max {
		step = max
	}
	return step / 2
}

// maxTries is the most connections one dialler (Dial's loop, or one slot's
// redial loop) can have made in elapsed: one, plus one per back-off whose
// floors still fit. A tight loop exceeds it however loaded the machine.
func maxTries(elapsed, first, max time.Duration) int {
	n := 1
	// The n-th try (1-based) comes after waits 0 .. n-2.
	for sum := backoffFloor(0, first, max); sum <= elapsed; sum += backoffFloor(n-1, first, max) {
		n++
	}
	return n
}

// checkGaps asserts that after each refused connection in s (from index
// from on, as one dialler made them) the next came no sooner than the back-
// off floor: the refusal's time was taken before it was written, so before
// the client read it, and the client waits the whole back-off before it
// connects again.
func checkGaps(t *testing.T, s drainSnapshot, from int, first, max time.Duration) {
	t.Helper()
	k := 0
	for i := from; i+1 < len(s.accepted); i++ {
		if s.refusedAt[i].IsZero() {
			k = 0 // served: the back-off starts over
			continue
		}
		gap := s.accepted[i+1].Sub(s.refusedAt[i])
		mustf(t, gap >= backoffFloor(k, first, max), "connection %d came %v after connection %d was refused, "+
			"under the back-off floor %v", i+1, gap, i, backoffFloor(k, first, max))
		k++
	}
}

const (
	drainBackoff    = 20 * time.Millisecond
	drainBackoffMax = 160 * time.Millisecond
)

// Dial against a pathd that answers the first connections' GetLimits (or
// Auth, with a token) DRAINING: each refused connection is closed, the next
// comes after the jittered, doubling back-off, and Dial succeeds once it is
// served. Before Dial retried, it failed on the first DRAINING.
func TestDrainDialRetriesUntilServed(t *testing.T) {
	for _, token := range []string{"", "secret"} {
		const refused = 4
		f := newDrainFake(t, refused)
		opts := Options{Conns: 2, Token: token, ReconnectBackoff: drainBackoff, ReconnectBackoffMax: drainBackoffMax}
		start := time.Now()
		c, err := Dial(ctxT(t, 30*time.Second), f.addr, opts)
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("token %q: Dial against %d refusals: %v", token, refused, err)
		}
		_, err = c.Ping(ctxT(t, 10*time.Second))
		mustf(t, err == nil, "ping after Dial: %v", err)
		c.Close()

		s := f.snapshot()
		mustf(t, len(s.accepted) == refused+2, "token %q: %d connections, want %d refused and 2 served",
			token, len(s.accepted), refused)
		want := "limits"
		if token != "" {
			want = "auth"
		}
		for i := 0; i < refused; i++ {
			mustf(t, s.firsts[i] == want, "token %q: connection %d began with %s", token, i, s.firsts[i])
			mustf(t, token == "" || !s.limitsAsked[i], "connection %d: GetLimits sent after Auth was refused", i)
			mustf(t, s.refusedAt[i] != time.Time{}, "connection %d was not refused", i)
		}
		waitFor(t, func() bool {
			s := f.snapshot()
			for i := 0; i < refused; i++ {
				if !s.closed[i] {
					return false
				}
			}
			return true
		}, "the client closes every refused connection")
		checkGaps(t, s, 0, drainBackoff, drainBackoffMax)
		// The waits after 4 refusals: at least 10+20+40+80 ms.
		var floors time.Duration
		for k := 0; k < refused; k++ {
			floors += backoffFloor(k, drainBackoff, drainBackoffMax)
		}
		mustf(t, elapsed >= floors, "Dial took %v, under its back-off floors %v", elapsed, floors)
	}
}

// A connection lost after a DRAINING (the replica stopping, or restarting)
// is tried again the same way; a status other than DRAINING still fails
// Dial at once.
func TestDrainDialRidesOutRestart(t *testing.T) {
	f := newDrainFake(t, 2)
	f.mu.Lock()
	f.hangUp = map[int]bool{2: true}
	f.mu.Unlock()
	opts := Options{Conns: 2, ReconnectBackoff: drainBackoff, ReconnectBackoffMax: drainBackoffMax}
	c, err := Dial(ctxT(t, 30*time.Second), f.addr, opts)
	mustf(t, err == nil, "Dial across DRAINING, DRAINING, a lost connection: %v", err)
	c.Close()
	mustf(t, f.count() == 5, "%d connections, want 2 refused, 1 lost, 2 served", f.count())
	checkGaps(t, f.snapshot(), 0, drainBackoff, drainBackoffMax)

	var n atomic.Int32
	refuser := fakeServer(t, 8, func(req *pb.Request) []*pb.Response {
		if n.Add(1) == 1 {
			return []*pb.Response{refusal(req, pb.Status_DRAINING, 0)}
		}
		return []*pb.Response{refusal(req, pb.Status_UNAUTHENTICATED, 0)}
	})
	opts.Token = "wrong"
	_, err = Dial(ctxT(t, 30*time.Second), refuser, opts)
	mustf(t, IsStatus(err, pb.Status_UNAUTHENTICATED) && n.Load() == 2,
		"a token refused after a DRAINING: %v (%d Auths)", err, n.Load())
}

// Dial against a pathd that stays draining gives up when its context ends
// (or Options.DialRetryTimeout without a deadline) with an error that says
// DRAINING and carries the status, having made no more connections than
// the back-off allows.
func TestDrainDialGivesUp(t *testing.T) {
	f := newDrainFake(t, 1<<30)
	opts := Options{Conns: 1, ReconnectBackoff: drainBackoff, ReconnectBackoffMax: drainBackoffMax}
	start := time.Now()
	c, err := Dial(ctxT(t, 1500*time.Millisecond), f.addr, opts)
	elapsed := time.Since(start)
	t.Logf("Dial gave up after %v: %v", elapsed, err)
	mustf(t, c == nil && err != nil, "Dial against a pathd that stays draining: %v", err)
	mustf(t, IsStatus(err, pb.Status_DRAINING) && strings.Contains(err.Error(), "DRAINING"),
		"the error says DRAINING: %v", err)
	n := f.count()
	mustf(t, n >= 2, "Dial tried %d connection(s) within its deadline", n)
	mustf(t, n <= maxTries(elapsed, drainBackoff, drainBackoffMax), "%d connections in %v: a tight loop", n, elapsed)
	checkGaps(t, f.snapshot(), 0, drainBackoff, drainBackoffMax)

	// No deadline on the context: DialRetryTimeout bounds it.
	g := newDrainFake(t, 1<<30)
	opts.DialRetryTimeout = time.Second
	start = time.Now()
	_, err = Dial(context.Background(), g.addr, opts)
	elapsed = time.Since(start)
	mustf(t, IsStatus(err, pb.Status_DRAINING), "Dial without a deadline: %v", err)
	mustf(t, g.count() >= 2 && g.count() <= maxTries(elapsed, drainBackoff, drainBackoffMax),
		"%d connections in %v", g.count(), elapsed)

	// A context cancelled in the back-off: TestDrainDialCancelledInBackoff.

	// A pathd that is not there still fails Dial at once: nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Dial(ctxT(t, 30*time.Second), addr, Options{Conns: 1, ReconnectBackoff: 10 * time.Second})
	mustf(t, errors.Is(err, ErrDisconnected) && !IsStatus(err, pb.Status_DRAINING), "nothing listening: %v", err)
}

// The redial loop after DRAINING (id 0) on a served connection: every new
// connection refused DRAINING is closed and the next comes after the
// doubling back-off; no call is served meanwhile, and once the fake serves
// again the slot is connected and calls go on.
func TestDrainRedialBacksOff(t *testing.T) {
	f := newDrainFake(t, 0)
	c := dial(t, f.addr, Options{Conns: 1, ReconnectBackoff: drainBackoff, ReconnectBackoffMax: drainBackoffMax})
	f.drain()
	start := time.Now()
	waitFor(t, func() bool { return f.count() >= 5 }, "four refused redials")
	mustf(t, c.Reconnects() == 0, "reconnects %d while draining", c.Reconnects())
	_, err := c.Ping(ctxT(t, 100*time.Millisecond))
	mustf(t, errors.Is(err, ErrDisconnected) && strings.Contains(err.Error(), "DRAINING"),
		"a call while every connection is refused: %v", err)
	f.ready()
	waitFor(t, func() bool { return c.Reconnects() == 1 }, "the slot served again")
	elapsed := time.Since(start)
	_, err = c.Ping(ctxT(t, 10*time.Second))
	mustf(t, err == nil, "ping after the drain: %v", err)
	n := f.count() - 1 // the redial loop's connections
	mustf(t, n <= maxTries(elapsed, drainBackoff, drainBackoffMax), "%d redials in %v: a tight loop", n, elapsed)
	s := f.snapshot()
	checkGaps(t, s, 1, drainBackoff, drainBackoffMax)
	// The fake notes a close when its reader sees it, which may come after
	// the snapshot on a loaded machine: wait for it.
	waitFor(t, func() bool {
		s := f.snapshot()
		for i := 1; i < len(s.accepted)-1; i++ {
			if !s.closed[i] {
				return false
			}
		}
		return true
	}, "the client closes every refused connection")
}

// countingProxy forwards every connection to a live pathd and counts them.
type countingProxy struct {
	addr string
	mu   sync.Mutex
	n    int
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	p := &countingProxy{}
	p.addr = listenFake(t, func(nc net.Conn) {
		p.mu.Lock()
		p.n++
		p.mu.Unlock()
		up, err := net.Dial("tcp", target)
		if err != nil {
			nc.Close()
			return
		}
		// Either side's end closes both (the test's end closes nc).
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(up, nc)
		go pipe(nc, up)
	})
	return p
}

func (p *countingProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// waitLog waits until the daemon's log holds text n times.
func waitLog(t *testing.T, d *daemon, text string, n int) {
	t.Helper()
	waitFor(t, func() bool {
		raw, _ := os.ReadFile(d.log.Name())
		return strings.Count(string(raw), text) >= n
	}, "pathd's log: "+text)
}

// A live pathd drained with SIGUSR1: Dial keeps trying until its context
// ends and says DRAINING; a Dial under way is served once SIGUSR2 comes;
// then a second drain retires the pool's connections, the redial loops
// back off, and the pool serves again after SIGUSR2.
func TestDrainLive(t *testing.T) {
	d := startDaemon(t, map[string]any{}, "127.0.0.1:0")
	opts := Options{Conns: 2, ReconnectBackoff: drainBackoff, ReconnectBackoffMax: drainBackoffMax}
	raycast := &pb.Raycast{Scene: "town", From: Cell(1, 1), To: Cell(5, 5)}
	signal := func(sig syscall.Signal) {
		if err := d.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}

	signal(syscall.SIGUSR1)
	waitLog(t, d, "draining: ", 1)
	a := newCountingProxy(t, d.addr)
	start := time.Now()
	_, err := Dial(ctxT(t, 2*time.Second), a.addr, opts)
	elapsed := time.Since(start)
	mustf(t, IsStatus(err, pb.Status_DRAINING) && strings.Contains(err.Error(), "DRAINING"),
		"Dial against a drained pathd: %v", err)
	mustf(t, a.count() >= 2 && a.count() <= maxTries(elapsed, drainBackoff, drainBackoffMax),
		"%d connections in %v", a.count(), elapsed)

	b := newCountingProxy(t, d.addr)
	dialled := make(chan error, 1)
	var c *Client
	go func() {
		var err error
		c, err = Dial(ctxT(t, 60*time.Second), b.addr, opts)
		dialled <- err
	}()
	waitFor(t, func() bool { return b.count() >= 3 }, "Dial refused twice")
	signal(syscall.SIGUSR2)
	err = <-dialled
	mustf(t, err == nil, "Dial once pathd serves again: %v", err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Raycast(ctxT(t, 10*time.Second), raycast)
	mustf(t, err == nil, "raycast after the drain: %v", err)

	// The redial loops: both connections are told DRAINING and retired.
	before := b.count()
	start = time.Now()
	signal(syscall.SIGUSR1)
	waitFor(t, func() bool { return b.count() >= before+6 }, "three refused redials per slot")
	mustf(t, c.Reconnects() == 0, "reconnects %d while draining", c.Reconnects())
	_, err = c.Raycast(ctxT(t, 200*time.Millisecond), raycast)
	mustf(t, errors.Is(err, ErrDisconnected) && strings.Contains(err.Error(), "DRAINING"),
		"a call while pathd drains: %v", err)
	signal(syscall.SIGUSR2)
	waitFor(t, func() bool { return c.Reconnects() == 2 }, "both slots served again")
	elapsed = time.Since(start)
	n := b.count() - before
	mustf(t, n <= 2*maxTries(elapsed, drainBackoff, drainBackoffMax), "%d redials in %v: a tight loop", n, elapsed)
	_, err = c.Raycast(ctxT(t, 10*time.Second), raycast)
	mustf(t, err == nil, "raycast after the second drain: %v", err)
}

// After a DRAINING, Dial's deadline bounds the tries as well as the waits:
// before, a try that got no answer ran its whole DialTimeout past it (the
// review measured 3.07 s with DialRetryTimeout 300 ms and DialTimeout 3 s).
func TestDrainDialTriesStopAtTheDeadline(t *testing.T) {
	f := newDrainFake(t, 1)
	f.mu.Lock()
	f.silentFrom = 1
	f.mu.Unlock()
	opts := Options{Conns: 1, ReconnectBackoff: 10 * time.Millisecond, ReconnectBackoffMax: 20 * time.Millisecond,
		DialRetryTimeout: 300 * time.Millisecond, DialTimeout: 60 * time.Second}
	start := time.Now()
	_, err := Dial(context.Background(), f.addr, opts)
	elapsed := time.Since(start)
	mustf(t, IsStatus(err, pb.Status_DRAINING), "the error says DRAINING: %v", err)
	mustf(t, errors.Is(err, ErrDisconnected), "no connection made within the deadline is ErrDisconnected: %v", err)
	mustf(t, elapsed < 30*time.Second, "Dial took %v: its last try ran on past DialRetryTimeout", elapsed)
	mustf(t, f.count() >= 2, "%d connection(s): the one after the DRAINING was never tried", f.count())
}

// Close while the redial loop is setting a connection up (its GetLimits
// unanswered) ends that try at once: the connection is closed long before
// DialTimeout.
func TestCloseEndsARedialInProgress(t *testing.T) {
	var mu sync.Mutex
	var second net.Conn
	secondClosed := make(chan time.Time, 1)
	n := 0
	addr := listenFake(t, func(nc net.Conn) {
		mu.Lock()
		n++
		k := n
		if k == 2 {
			second = nc
		}
		mu.Unlock()
		go readRequests(nc, func() {
			if k == 2 {
				secondClosed <- time.Now()
			}
		}, func(req *pb.Request) bool {
			if k == 1 && req.GetLimits() != nil {
				return rawWrite(nc, limitsTo(req, 4)) == nil
			}
			return true // every later connection: read, never answered
		})
	})
	c, err := Dial(ctxT(t, 5*time.Second), addr, Options{Conns: 1, DialTimeout: 30 * time.Second,
		ReconnectBackoff: 5 * time.Millisecond, ReconnectBackoffMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	first := n
	mu.Unlock()
	mustf(t, first == 1, "%d connections made by Dial", first)
	// The served connection is lost (its socket closed under the client):
	// the slot is redialled, and the new connection waits for a GetLimits
	// answer that never comes.
	waitConn := func() bool { mu.Lock(); defer mu.Unlock(); return second != nil }
	c.mu.Lock()
	cn := c.conns[0]
	c.mu.Unlock()
	cn.nc.Close()
	waitFor(t, waitConn, "the redial's connection")
	closedAt := time.Now()
	c.Close()
	select {
	case at := <-secondClosed:
		mustf(t, at.Sub(closedAt) < 5*time.Second, "the redial's connection closed %v after Close",
			at.Sub(closedAt))
	case <-time.After(10 * time.Second):
		t.Fatalf("the redial's connection is still open 10 s after Close (DialTimeout 30 s)")
	}
}
