// One TCP connection to pathd: length-prefixed frames (a 4-byte big-endian
// length, then one protobuf message; docs/PROTOCOL.md section 1), many
// requests in flight, answers matched by id. One reader goroutine per
// connection decodes every frame and hands it to its request; writers share
// the socket under a mutex so each frame goes out whole.

package pathd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	pb "pathd.example/client/pathdpb"
)

// call is one request waiting for its final frame.
type call struct {
	id     uint64
	weight int       // in-flight slots it holds (0: a kind the server does not count)
	asm    assembler // multi-frame answers (paths, routes); nil for one frame
	watch  *Watch    // a Watch: its non-final frames are events
	final  *pb.Response
	err    error
	done   chan struct{}
}

type conn struct {
	cl   *Client
	slot int
	nc   net.Conn
	br   *bufio.Reader

	wmu sync.Mutex // one frame at a time on the socket

	refreshing atomic.Bool // a GetLimits refresh is under way

	mu     sync.Mutex
	calls  map[uint64]*call
	dead   error         // why the connection ended; nil while it serves
	closed chan struct{} // closed when it ends

	// Guarded by cl.mu: the flow-control state.
	cap  int  // the server's max_inflight_per_conn (or Options.InflightCap)
	used int  // slots held by requests sent and not yet finally answered
	live bool // counted by the pool

	retiring bool // guarded by mu: replaced (replicas.go); closes once nothing is owed
	// drainSeen (guarded by mu): DRAINING (id 0) arrived, perhaps before
	// connect counted the connection (retire then did nothing): connect
	// refuses such a connection as it does one whose first answer is DRAINING.
	drainSeen bool
}

func newConn(cl *Client, slot int, nc net.Conn) *conn {
	return &conn{cl: cl, slot: slot, nc: nc, br: bufio.NewReaderSize(nc, 64<<10), calls: map[uint64]*call{},
		closed: make(chan struct{})}
}

// start registers c and sends its request.
func (cn *conn) start(c *call, req *pb.Request) error {
	payload, err := proto.Marshal(req)
	if err != nil {
		return fmt.Errorf("pathd: encoding the request: %w", err)
	}
	frame := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(frame, uint32(len(payload)))
	copy(frame[4:], payload)

	cn.mu.Lock()
	if cn.dead != nil {
		err := cn.dead
		cn.mu.Unlock()
		return err
	}
	cn.calls[c.id] = c
	cn.mu.Unlock()

	cn.wmu.Lock()
	_ = cn.nc.SetWriteDeadline(time.Now().Add(cn.cl.opts.WriteTimeout))
	_, err = cn.nc.Write(frame)
	cn.wmu.Unlock()
	if err != nil {
		// A partial frame leaves the stream unusable: the connection goes,
		// and c with it.
		cn.fail(fmt.Errorf("%w: writing to %s: %v", ErrDisconnected, cn.cl.addr, err))
		<-c.done
		return c.err
	}
	return nil
}

// readFrame reads one whole Response, refusing a length above the limit
// before buffering it.
func (cn *conn) readFrame() (*pb.Response, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(cn.br, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(cn.cl.opts.MaxFrameBytes) {
		return nil, protocolError("server sent a %d-byte frame, above the %d-byte limit", n, cn.cl.opts.MaxFrameBytes)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(cn.br, buf); err != nil {
		return nil, err
	}
	r := &pb.Response{}
	if err := proto.Unmarshal(buf, r); err != nil {
		return nil, protocolError("server sent a frame that does not decode: %v", err)
	}
	return r, nil
}

func (cn *conn) readLoop() {
	for {
		r, err := cn.readFrame()
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				err = fmt.Errorf("%w: server %s closed the connection", ErrDisconnected, cn.cl.addr)
			} else if !errors.Is(err, ErrProtocol) {
				err = fmt.Errorf("%w: reading from %s: %v", ErrDisconnected, cn.cl.addr, err)
			}
			cn.fail(err)
			return
		}
		if r.Id == 0 && r.Status == pb.Status_DRAINING {
			// The replica is draining: the pool moves on, and this
			// connection closes once the answers owed on it arrived.
			cn.mu.Lock()
			cn.drainSeen = true
			cn.mu.Unlock()
			cn.retire(fmt.Errorf("%w: %s is draining", ErrDisconnected, cn.cl.addr))
			continue
		}
		if r.Id == 0 {
			// A connection-level answer (MALFORMED, FRAME_TOO_LARGE, too many
			// connections, a token no longer accepted): the server closes.
			cn.fail(fmt.Errorf("%w: server closed the connection after %v", ErrDisconnected, statusError(r)))
			return
		}
		cn.mu.Lock()
		c := cn.calls[r.Id]
		if c != nil && r.Final {
			delete(cn.calls, r.Id)
		}
		cn.mu.Unlock()
		if c == nil {
			continue // an answer to a request this client no longer tracks
		}
		if !r.Final {
			switch {
			case c.watch != nil:
				c.watch.push(r.GetWatchEvent(), nil)
			case c.asm != nil:
				err = c.asm.feed(r)
			default:
				err = protocolError("request %d: a non-final frame for a one-frame answer", r.Id)
			}
			if err != nil {
				cn.fail(err)
				return
			}
			continue
		}
		// Slots first, so a caller that sends again as soon as it has its
		// answer finds them free.
		if c.weight > 0 {
			cn.cl.release(cn, c.weight)
		}
		c.final = r
		if c.watch != nil {
			c.watch.finish(r)
		}
		close(c.done)
		cn.closeIfDrained()
	}
}

// fail ends the connection: every request still waiting gets err, and the
// pool stops counting the connection (and dials it again).
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	if cn.dead != nil {
		cn.mu.Unlock()
		return
	}
	cn.dead = err
	calls := cn.calls
	cn.calls = nil
	cn.mu.Unlock()
	close(cn.closed)
	_ = cn.nc.Close()
	for _, c := range calls {
		c.err = err
		if c.watch != nil {
			c.watch.push(nil, err)
		}
		close(c.done)
	}
	cn.cl.connLost(cn, err)
}

// keepalive pings the connection every interval, so the server's
// idle_timeout_ms never closes it under a request about to be sent.
func (cn *conn) keepalive(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-cn.closed:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), interval)
			_, _ = cn.cl.send(ctx, cn, &pb.Request{Body: &pb.Request_Ping{Ping: &pb.Ping{}}}, 0, nil, nil)
			cancel()
		}
	}
}
