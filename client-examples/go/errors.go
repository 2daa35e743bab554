// Errors of the pathd Go client: the server's refusals (StatusError, with the
// wire status) and the client's own failures (a full local queue, a lost
// connection, a server that broke the protocol), each testable with
// errors.Is / errors.As.

package pathd

import (
	"errors"
	"fmt"

	pb "pathd.example/client/pathdpb"
)

var (
	// ErrQueueFull: every connection's in-flight cap is taken and
	// Options.QueueLimit requests already wait for a slot. Nothing was
	// sent; slow down, or raise QueueLimit or Conns.
	ErrQueueFull = errors.New("pathd: local request queue is full")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("pathd: client closed")
	// ErrDisconnected: the connection carrying the request was lost (or
	// none could be made within the deadline), and the request was not safe
	// to send again or the deadline passed (see "Replicas" in the package
	// notes); also ends a Watch whose connection was lost or replaced.
	ErrDisconnected = errors.New("pathd: disconnected")
	// ErrProtocol: the server sent something the protocol does not allow;
	// the connection was closed, as the server does to clients.
	ErrProtocol = errors.New("pathd: protocol error")
	// ErrTooLarge: a Batch of more items than a connection's in-flight cap
	// (GetLimits.max_batch_items), which the server could never admit.
	ErrTooLarge = errors.New("pathd: batch larger than the connection's in-flight cap")
)

// StatusError is an answer the call does not accept: any status but OK
// (and PARTIAL for paths and routes).
type StatusError struct {
	Status    pb.Status
	Message   string // the server's reason, when it gave one
	Version   uint64 // STALE_VERSION: the version the scene is at
	RequestID uint64
	// Result is the decoded answer when one came with the status (a *Path
	// for FindPath, a *Route for FindRoute), else nil.
	Result any
}

func (e *StatusError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("pathd: %s: %s", e.Status, e.Message)
	}
	return "pathd: " + e.Status.String()
}

// StatusOf returns the wire status an error carries (a *StatusError's), or
// OK and false for any other error.
func StatusOf(err error) (pb.Status, bool) {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status, true
	}
	return pb.Status_OK, false
}

// IsStatus reports whether err is a StatusError with status st.
func IsStatus(err error, st pb.Status) bool {
	got, ok := StatusOf(err)
	return ok && got == st
}

func statusError(r *pb.Response) *StatusError {
	e := &StatusError{Status: r.Status, Message: r.Message, RequestID: r.Id}
	if b, ok := r.Body.(*pb.Response_Error); ok && b.Error != nil {
		if e.Message == "" {
			e.Message = b.Error.Message
		}
		e.Version = b.Error.Version
	}
	return e
}

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}
