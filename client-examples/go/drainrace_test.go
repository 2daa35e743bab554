// Review rev-c4: a replica that starts draining while a new connection is
// set up (SIGUSR1 between its GetLimits answer and the client counting the
// connection) sends DRAINING (id 0) right behind the GetLimits answer. The
// client must treat that connection as draining (PROTOCOL.md 7b; the
// Python client retires it straight away: test_pathd_client.py,
// drain_twice_with_a_queue), not count it as a served one.

package pathd

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	pb "pathd.example/client/pathdpb"
)

func TestDrainStartsDuringConnect(t *testing.T) {
	var mu sync.Mutex
	n := 0
	addr := listenFake(t, func(nc net.Conn) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		go readRequests(nc, nil, func(req *pb.Request) bool {
			var frames []*pb.Response
			switch {
			case req.GetPing() != nil:
				frames = []*pb.Response{pongTo(req)}
			case i > 0 && req.GetLimits() != nil:
				frames = []*pb.Response{limitsTo(req, 8)}
			case i > 0 && req.GetWatch() != nil:
				frames = []*pb.Response{{Id: req.Id, Body: &pb.Response_WatchEvent{WatchEvent: &pb.WatchEvent{
					Kind: pb.WatchEventKind_WATCH_STARTED, Scene: "demo"}}}}
			case req.GetLimits() != nil:
				// Connection 0: the drain begins right after its GetLimits
				// answer; both frames go out in one write (one segment).
				frames = []*pb.Response{limitsTo(req, 8), {Id: 0, Final: true, Status: pb.Status_DRAINING}}
			default: // connection 0 once draining
				frames = []*pb.Response{refusal(req, pb.Status_DRAINING, 0)}
			}
			var buf []byte
			for _, r := range frames {
				var b bufWriter
				_ = rawWrite(&b, r)
				buf = append(buf, b...)
			}
			_, err := nc.Write(buf)
			return err == nil
		})
	})
	c := dial(t, addr, Options{Conns: 1, ReconnectBackoff: 20 * time.Millisecond, ReconnectBackoffMax: 40 * time.Millisecond})
	// The draining connection must be replaced: a second one is opened
	// within a few back-offs. (Before a fix: never; the first stays counted
	// until a request other than Ping is refused on it.)
	deadline := time.Now().Add(10 * time.Second) // a hang guard, as waitFor
	for {
		mu.Lock()
		got := n
		mu.Unlock()
		if got >= 2 {
			break
		}
		if time.Now().After(deadline) {
			// A Watch placed now lands on the draining connection and fails
			// with DRAINING; the connection is not retired by it either.
			_, err := c.Watch(ctxT(t, 5*time.Second), "demo")
			t.Fatalf("the connection told DRAINING during its set-up is still the pool's (retired %d, "+
				"a Watch now: %v)", c.retired.Load(), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	w, err := c.Watch(ctxT(t, 5*time.Second), "demo")
	mustf(t, err == nil, "a watch after the drain: %v", err)
	_ = w
}

type bufWriter []byte

func (b *bufWriter) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }

// Review rev-c4: Dial's context cancelled during its back-off ends Dial
// then, with an error that says so. (TestDrainDialGivesUp's sub-test of
// this cannot fail: with ReconnectBackoff 10 s and the default
// DialRetryTimeout of 5 s its first wait would pass the deadline, so Dial
// returns "the next wait would pass it" before cancel() runs, whether or
// not sleepBackoff watches ctx.)
func TestDrainDialCancelledInBackoff(t *testing.T) {
	f := newDrainFake(t, 1<<30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Waits of 30-60 s, within a 10-minute DialRetryTimeout: only the
	// cancel can end this Dial before the hang guard below.
	opts := Options{Conns: 1, ReconnectBackoff: time.Minute, ReconnectBackoffMax: time.Minute,
		DialRetryTimeout: 10 * time.Minute}
	done := make(chan error, 1)
	go func() {
		_, err := Dial(ctx, f.addr, opts)
		done <- err
	}()
	// The client closes the refused connection after it read the refusal
	// (drained is set), before its wait: cancel lands in the back-off.
	waitFor(t, func() bool { s := f.snapshot(); return len(s.closed) > 0 && s.closed[0] },
		"the first connection refused and closed")
	select {
	case err := <-done:
		t.Fatalf("Dial returned before it was cancelled: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		mustf(t, IsStatus(err, pb.Status_DRAINING) && errors.Is(err, context.Canceled) && errors.Is(err, ErrDisconnected),
			"Dial cancelled in its back-off: %v", err)
	case <-time.After(20 * time.Second): // a hang guard: the wait's floor is 30 s
		t.Fatal("Dial did not return when its context was cancelled")
	}
	mustf(t, f.count() == 1, "%d connections", f.count())
}
