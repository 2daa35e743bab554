// Watching scenes (docs/PROTOCOL.md, "Watching scenes"): a Watch request's
// id answers with a WatchEvent per change until its final frame. The reader
// goroutine must never block on a slow consumer, so events queue here, and
// the server bounds what waits (limits.watch_buffer_bytes, past which it
// ends the watch with WATCH_OVERFLOW).

package pathd

import (
	"context"
	"fmt"
	"io"
	"sync"

	pb "pathd.example/client/pathdpb"
)

// Watch is one open watch, on one of the client's connections.
type Watch struct {
	ID uint64
	cl *Client
	cn *conn

	mu      sync.Mutex
	events  []*pb.WatchEvent
	end     error // set once the watch has ended: io.EOF, a *StatusError, or a disconnect
	started bool
	notify  chan struct{}
}

// Watch subscribes to the scenes' changes and returns once the server
// accepted it (its first event, WATCH_STARTED per scene, is waiting in
// Next). A refusal (UNKNOWN_SCENE, LIMIT_EXCEEDED, ...) is a *StatusError.
func (c *Client) Watch(ctx context.Context, scenes ...string) (*Watch, error) {
	w := &Watch{cl: c, notify: make(chan struct{}, 1)}
	cn, err := c.acquire(ctx, 0)
	if err != nil {
		return nil, err
	}
	// The request's own context would end the watch's wait below, not the
	// watch: send it without one.
	req := &pb.Request{Id: c.nextID.Add(1), Body: &pb.Request_Watch{Watch: &pb.Watch{Scenes: scenes}}}
	w.ID, w.cn = req.Id, cn
	errc := make(chan error, 1)
	go func() {
		_, err := c.send(context.Background(), cn, req, 0, nil, w)
		errc <- err
	}()
	for {
		w.mu.Lock()
		started, end := w.started, w.end
		w.mu.Unlock()
		if started {
			return w, nil
		}
		if end != nil {
			return nil, end
		}
		select {
		case <-w.notify:
		case err := <-errc:
			if err != nil {
				return nil, err
			}
		case <-ctx.Done():
			_ = w.Close(context.Background())
			return nil, ctx.Err()
		}
	}
}

// push queues an event (ev) or ends the watch (err). Past
// Options.WatchBuffer unread events the watch ends with WATCH_OVERFLOW (the
// events already queued stay readable) and is unwatched on the server.
func (w *Watch) push(ev *pb.WatchEvent, err error) {
	w.mu.Lock()
	overflow := false
	if ev != nil && w.end == nil {
		if len(w.events) >= w.cl.opts.WatchBuffer {
			overflow = true
			err = &StatusError{Status: pb.Status_WATCH_OVERFLOW, RequestID: w.ID, Message: fmt.Sprintf(
				"more than %d events unread (Options.WatchBuffer): read them with Next, or watch again", w.cl.opts.WatchBuffer)}
		} else {
			w.events = append(w.events, ev)
			w.started = true
		}
	}
	if err != nil && w.end == nil {
		w.end = err
	}
	w.mu.Unlock()
	if overflow {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), w.cl.opts.DialTimeout)
			defer cancel()
			_ = w.unwatch(ctx)
		}()
	}
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// finish takes the watch's final frame: its last event (WATCH_ENDED,
// SCENE_DROPPED) or a refusal or overflow.
func (w *Watch) finish(r *pb.Response) {
	if r.Status == pb.Status_OK {
		w.push(r.GetWatchEvent(), io.EOF)
	} else {
		w.push(nil, statusError(r))
	}
}

// Next returns the next event in order; io.EOF after the last one, a
// *StatusError WATCH_OVERFLOW when the server ended the watch because it
// was not read fast enough, ErrDisconnected when the connection was lost.
func (w *Watch) Next(ctx context.Context) (*pb.WatchEvent, error) {
	for {
		w.mu.Lock()
		if len(w.events) > 0 {
			ev := w.events[0]
			w.events = w.events[1:]
			w.mu.Unlock()
			return ev, nil
		}
		end := w.end
		w.mu.Unlock()
		if end != nil {
			return nil, end
		}
		select {
		case <-w.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close ends the watch (Unwatch); its final WATCH_ENDED event still comes
// from Next. Closing a watch that has ended already does nothing.
func (w *Watch) Close(ctx context.Context) error {
	w.mu.Lock()
	ended := w.end != nil
	w.mu.Unlock()
	if ended || w.cn == nil {
		return nil
	}
	return w.unwatch(ctx)
}

func (w *Watch) unwatch(ctx context.Context) error {
	r, err := w.cl.send(ctx, w.cn, &pb.Request{Body: &pb.Request_Unwatch{Unwatch: &pb.Unwatch{WatchId: w.ID}}}, 0, nil, nil)
	if err != nil {
		return err
	}
	if r.Status != pb.Status_OK {
		return fmt.Errorf("pathd: unwatch: %w", statusError(r))
	}
	return nil
}
