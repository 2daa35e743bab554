// Tests of the replicas' transport (replicas.go; docs/PROTOCOL.md, "Clients
// and replicas"): fake servers that drop connections and send DRAINING,
// UNAVAILABLE and STALE_VERSION (which today's pathd never sends), and a
// live pathd killed with SIGKILL and restarted on the same port mid-run.

package pathd

import (
	"errors"
	"net"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "pathd.example/client/pathdpb"
)

// multiFake is a fake pathd that keeps every connection it accepted (0, 1,
// ...): GetLimits is answered here, every other request goes to handle with
// its connection's index, which writes answers with rawWrite (or closes).
type multiFake struct {
	addr   string
	mu     sync.Mutex
	conns  []net.Conn
	reqs   []*pb.Request
	on     []int        // the connection each of reqs came on
	closed map[int]bool // connections the client closed
}

func newMultiFake(t *testing.T, handle func(f *multiFake, conn int, req *pb.Request)) *multiFake {
	t.Helper()
	f := &multiFake{closed: map[int]bool{}}
	f.addr = listenFake(t, func(nc net.Conn) {
		f.mu.Lock()
		i := len(f.conns)
		f.conns = append(f.conns, nc)
		f.mu.Unlock()
		closed := func() {
			f.mu.Lock()
			f.closed[i] = true
			f.mu.Unlock()
		}
		go readRequests(nc, closed, func(req *pb.Request) bool {
			if req.GetLimits() != nil {
				_ = rawWrite(nc, limitsTo(req, 8))
				return true
			}
			f.mu.Lock()
			f.reqs = append(f.reqs, req)
			f.on = append(f.on, i)
			f.mu.Unlock()
			handle(f, i, req)
			return true
		})
	})
	return f
}

func (f *multiFake) send(conn int, r *pb.Response) {
	f.mu.Lock()
	nc := f.conns[conn]
	f.mu.Unlock()
	_ = rawWrite(nc, r)
}

func (f *multiFake) drop(conn int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns[conn].Close()
}

func (f *multiFake) isClosed(conn int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed[conn]
}

func (f *multiFake) requests() ([]*pb.Request, []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.Request(nil), f.reqs...), append([]int(nil), f.on...)
}

func pongTo(req *pb.Request) *pb.Response {
	return &pb.Response{Id: req.Id, Final: true, Body: &pb.Response_Pong{Pong: &pb.Pong{Nonce: req.GetPing().GetNonce()}}}
}

func updatedTo(req *pb.Request, version uint64) *pb.Response {
	return &pb.Response{Id: req.Id, Final: true, Body: &pb.Response_Update{Update: &pb.UpdateResult{Version: version, CellsChanged: 1}}}
}

func refusal(req *pb.Request, st pb.Status, version uint64) *pb.Response {
	return &pb.Response{Id: req.Id, Final: true, Status: st, Body: &pb.Response_Error{Error: &pb.Error{Message: "fake", Version: version}}}
}

func oneCell(scene string) *pb.UpdateCells {
	return &pb.UpdateCells{Scene: scene, Op: pb.UpdateOp_UPDATE_BLOCK,
		Target: &pb.UpdateCells_Cells{Cells: &pb.CellList{Cells: []*pb.Cell{{X: 1, Y: 1}}}}}
}

var hexKey = regexp.MustCompile(`^[0-9a-f]{32}$`)

// A query and a keyed update lost with their connection go again, the
// update with the same key; an unkeyed update (keys off) does not.
func TestReplicaLostRequestsSentAgainWhenSafe(t *testing.T) {
	f := newMultiFake(t, func(f *multiFake, conn int, req *pb.Request) {
		switch {
		case conn == 0: // loses whatever it is sent first
			f.drop(conn)
		case req.GetPing() != nil:
			f.send(conn, pongTo(req))
		case req.GetUpdateCells().GetScene() == "keyed" && conn == 1:
			f.drop(conn)
		case req.GetUpdateCells().GetScene() == "keyed":
			f.send(conn, updatedTo(req, 5))
		default: // the unkeyed update: lost
			f.drop(conn)
		}
	})
	c := dial(t, f.addr, Options{Conns: 1})
	ctx := ctxT(t, 10*time.Second)
	_, err := c.Ping(ctx)
	mustf(t, err == nil, "ping across a lost connection: %v", err)
	msg := oneCell("keyed")
	u, err := c.UpdateCells(ctx, msg)
	mustf(t, err == nil && u.Version == 5, "keyed update across a lost connection: %v %v", err, u)
	mustf(t, msg.IdempotencyKey == "", "the caller's message keeps no key: %q", msg.IdempotencyKey)
	mustf(t, c.Resent() == 2 && c.Reconnects() >= 2, "resent %d reconnects %d", c.Resent(), c.Reconnects())

	plain := dial(t, f.addr, Options{Conns: 1, NoIdempotencyKeys: true})
	_, err = plain.UpdateCells(ctx, oneCell("plain"))
	mustf(t, errors.Is(err, ErrDisconnected), "an unkeyed update is not sent again: %v", err)

	reqs, _ := f.requests()
	var keys []string
	plainSeen := 0
	for _, r := range reqs {
		if u := r.GetUpdateCells(); u != nil && u.Scene == "keyed" {
			keys = append(keys, u.IdempotencyKey)
		} else if u != nil {
			plainSeen++
			mustf(t, u.IdempotencyKey == "", "keys off: %q", u.IdempotencyKey)
		}
	}
	mustf(t, len(keys) == 2 && keys[0] == keys[1] && hexKey.MatchString(keys[0]), "keys %q", keys)
	mustf(t, plainSeen == 1, "the unkeyed update went %d times", plainSeen)
}

// UNAVAILABLE and STALE_VERSION are retried with the same key.
func TestReplicaUnavailableAndBehindRetried(t *testing.T) {
	var n int
	f := newMultiFake(t, func(f *multiFake, conn int, req *pb.Request) {
		n++
		switch n {
		case 1:
			f.send(conn, refusal(req, pb.Status_UNAVAILABLE, 0))
		case 2:
			f.send(conn, refusal(req, pb.Status_STALE_VERSION, 6))
		default:
			f.send(conn, updatedTo(req, 7))
		}
	})
	c := dial(t, f.addr, Options{Conns: 1})
	u, err := c.UpdateCells(ctxT(t, 10*time.Second), oneCell("x"))
	mustf(t, err == nil && u.Version == 7, "after UNAVAILABLE and BEHIND: %v %v", err, u)
	mustf(t, c.ReplicaRetries() == 2, "replica retries %d", c.ReplicaRetries())
	reqs, _ := f.requests()
	mustf(t, len(reqs) == 3 && reqs[0].GetUpdateCells().IdempotencyKey == reqs[2].GetUpdateCells().IdempotencyKey &&
		reqs[1].GetUpdateCells().IdempotencyKey == reqs[0].GetUpdateCells().IdempotencyKey, "one key for all: %v", reqs)
}

// DRAINING with id 0: the next call goes on a new connection, the answer
// owed on the old one still arrives, then the client closes the old one; a
// watch on it ends with ErrDisconnected. A request answered DRAINING goes
// again on a new connection.
func TestReplicaDraining(t *testing.T) {
	owed := make(chan *pb.Request, 1)
	f := newMultiFake(t, func(f *multiFake, conn int, req *pb.Request) {
		switch {
		case req.GetWatch() != nil:
			f.send(conn, &pb.Response{Id: req.Id, Body: &pb.Response_WatchEvent{WatchEvent: &pb.WatchEvent{
				Kind: pb.WatchEventKind_WATCH_STARTED, Scene: "demo"}}})
		case req.GetFindPath() != nil:
			owed <- req
			f.send(conn, &pb.Response{Id: 0, Final: true, Status: pb.Status_DRAINING})
		case req.GetPing() != nil:
			f.send(conn, pongTo(req))
			if conn == 1 {
				p := <-owed
				f.send(0, &pb.Response{Id: p.Id, Final: true, Body: &pb.Response_Path{Path: &pb.PathChunk{
					Points: &pb.Waypoints{Dx: []int32{1}, Dy: []int32{1}}, Cost: 0, TotalWaypoints: 1}}})
			}
		case req.GetUpdateCells() != nil && conn == 1:
			f.send(conn, refusal(req, pb.Status_DRAINING, 0))
		case req.GetUpdateCells() != nil:
			f.send(conn, updatedTo(req, 3))
		}
	})
	c := dial(t, f.addr, Options{Conns: 1})
	ctx := ctxT(t, 10*time.Second)
	w, err := c.Watch(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		p   *Path
		err error
	}
	path := make(chan answer, 1)
	go func() {
		p, err := c.FindPath(ctx, &pb.FindPath{Scene: "demo", Start: Cell(1, 1), Goal: Cell(1, 1)})
		path <- answer{p, err}
	}()
	_, err = w.Next(ctx) // STARTED
	mustf(t, err == nil, "started: %v", err)
	_, err = w.Next(ctx)
	mustf(t, errors.Is(err, ErrDisconnected), "the watch ends with its connection: %v", err)
	waitFor(t, func() bool { return c.Reconnects() == 1 }, "a new connection after DRAINING")
	_, err = c.Ping(ctx)
	mustf(t, err == nil, "ping on the new connection: %v", err)
	a := <-path
	mustf(t, a.err == nil && cells(a.p) == "[[1 1]]", "the owed answer arrives on the old connection: %v %v", a.err, a.p)
	waitFor(t, func() bool { return f.isClosed(0) }, "the client closes the drained connection")

	u, err := c.UpdateCells(ctx, oneCell("x"))
	mustf(t, err == nil && u.Version == 3, "an update answered DRAINING goes again: %v %v", err, u)
	waitFor(t, func() bool { return f.isClosed(1) }, "the client closes the second drained connection")
	reqs, on := f.requests()
	last := len(reqs) - 1
	mustf(t, on[last] == 2 && reqs[last].GetUpdateCells().IdempotencyKey == reqs[last-1].GetUpdateCells().IdempotencyKey,
		"resent on connection %d with the same key", on[last])
	mustf(t, c.ReplicaRetries() == 1, "replica retries %d", c.ReplicaRetries())
}

// A connection older than MaxConnAge is replaced; the old one closes.
func TestReplicaMaxConnAge(t *testing.T) {
	f := newMultiFake(t, func(f *multiFake, conn int, req *pb.Request) {
		f.send(conn, pongTo(req))
	})
	c := dial(t, f.addr, Options{Conns: 1, MaxConnAge: 200 * time.Millisecond})
	ctx := ctxT(t, 10*time.Second)
	waitFor(t, func() bool { return f.isClosed(0) && c.Reconnects() >= 1 }, "the first connection replaced and closed")
	_, err := c.Ping(ctx)
	mustf(t, err == nil, "ping after the replacement: %v", err)
	_, on := f.requests()
	mustf(t, on[len(on)-1] >= 1, "served on a newer connection: %v", on)
}

// SIGKILL of pathd mid-run and a restart on the same port: every query is
// answered, and the restarted daemon's acknowledged versions are dense (an
// update applied twice would leave a gap).
func TestReplicaKillAndRestart(t *testing.T) {
	d := startDaemon(t, map[string]any{}, "127.0.0.1:0")
	addr := d.addr
	c := dial(t, addr, Options{Conns: 1, RetryTimeout: 20 * time.Second})
	var mu sync.Mutex
	var versions []uint64
	queries := 0
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		ctx := ctxT(t, 60*time.Second)
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := c.Raycast(ctx, &pb.Raycast{Scene: "town", From: Cell(1, 1), To: Cell(5, 5)}); err != nil {
				done <- err
				return
			}
			u, err := c.UpdateCells(ctx, &pb.UpdateCells{Scene: "town", Op: pb.UpdateOp_UPDATE_COST, Cost: 2,
				Target: &pb.UpdateCells_Cells{Cells: &pb.CellList{Cells: []*pb.Cell{{X: 5, Y: 5}}}}})
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			queries++
			versions = append(versions, u.Version)
			mu.Unlock()
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return queries }
	waitFor(t, func() bool { return count() >= 10 }, "load before the kill")
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	d.done <- nil // stop() (cleanup) reads it again
	killed := count()
	d2 := startDaemon(t, map[string]any{}, addr)
	waitFor(t, func() bool { return count() >= killed+10 }, "load after the restart")
	close(stop)
	mustf(t, <-done == nil, "every call answered across the restart")
	mustf(t, c.Reconnects() >= 1, "reconnected")
	mu.Lock()
	restart := 0
	for i := 1; i < len(versions); i++ {
		if versions[i] <= versions[i-1] {
			restart = i
		}
	}
	after := versions[restart:]
	mu.Unlock()
	for i := 1; i < len(after); i++ {
		mustf(t, after[i] == after[i-1]+1, "dense versions after the restart: %v", after)
	}
	info, err := c.SceneInfo(ctxT(t, 10*time.Second), &pb.GetSceneInfo{Scene: "town"})
	mustf(t, err == nil && info.Version == after[len(after)-1], "the scene is at the last acknowledged version: %v %v", err, info)
	d2.stop(t)
}
