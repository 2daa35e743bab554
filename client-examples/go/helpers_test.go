// Test helpers: the live daemon the harness started (PATHD_ADDR, from
// scripts/run-with-daemon.sh), daemons a test starts itself from
// PATHD_BIN and PATHD_CONFIG with other limits, and a fake server for exact
// answer sequences.

package pathd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	pb "pathd.example/client/pathdpb"
)

// trapSide: the trap scene's side. A wall down its middle column, open at
// the bottom row only, makes A* (jump point search off) expand most of the
// grid for a path across the top: a request that stays in flight a while.
const trapSide = 1024

func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run this through scripts/run-with-daemon.sh (ctest -R client_go)", name)
	}
	return v
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// dial connects to addr and closes the client when the test ends.
func dial(t *testing.T, addr string, opts Options) *Client {
	t.Helper()
	c, err := Dial(ctxT(t, 10*time.Second), addr, opts)
	if err != nil {
		t.Fatalf("Dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type daemon struct {
	cmd  *exec.Cmd
	dir  string
	addr string
	log  *os.File
	done chan error
}

var listenRE = regexp.MustCompile(`listening on (\S+)`)

// startDaemon starts a pathd from PATHD_CONFIG with limits changed, A*
// only, one worker thread, the trap scene added, listening on listen
// ("127.0.0.1:0" for any port); top replaces top-level keys (auth).
func startDaemon(t *testing.T, limits map[string]any, listen string, top ...map[string]any) *daemon {
	t.Helper()
	cfgPath := env(t, "PATHD_CONFIG")
	cfg := readConfig(t, cfgPath)
	base := filepath.Dir(cfgPath)
	scenes := cfg["scenes"].([]any)
	for _, s := range scenes {
		m := s.(map[string]any)
		m["map"] = filepath.Join(base, m["map"].(string))
	}
	dir := t.TempDir()
	var trap strings.Builder
	for y := 0; y < trapSide; y++ {
		for x := 0; x < trapSide; x++ {
			if x == trapSide/2 && y < trapSide-1 {
				trap.WriteByte('#')
			} else {
				trap.WriteByte('.')
			}
		}
		trap.WriteByte('\n')
	}
	trapPath := filepath.Join(dir, "trap.txt")
	if err := os.WriteFile(trapPath, []byte(trap.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg["scenes"] = append(scenes, map[string]any{"name": "trap", "map": trapPath, "format": "ascii"})
	cfg["listen"] = listen
	cfg["metrics_listen"] = ""
	cfg["jump_point_search"] = false
	cfg["threads"] = 1
	for _, m := range top {
		for k, v := range m {
			cfg[k] = v
		}
	}
	lim := cfg["limits"].(map[string]any)
	for k, v := range limits {
		lim[k] = v
	}
	out, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "pathd.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	d := &daemon{dir: dir, done: make(chan error, 1)}
	var err error
	d.log, err = os.Create(filepath.Join(dir, "pathd.log"))
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(env(t, "PATHD_BIN"), "--config", path)
	d.cmd.Stderr = d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() { d.stop(t) })
	deadline := time.Now().Add(10 * time.Second)
	for d.addr == "" {
		text, _ := os.ReadFile(d.log.Name())
		if m := listenRE.FindSubmatch(text); m != nil {
			d.addr = string(m[1])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper pathd did not listen within 10 s:\n%s", text)
		}
		select {
		case err := <-d.done:
			d.done <- err
			t.Fatalf("helper pathd exited (%v):\n%s", err, text)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return d
}

// readConfig reads a pathd JSON config.
func readConfig(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// stop sends SIGTERM and waits for the exit (once; later calls do nothing).
func (d *daemon) stop(t *testing.T) {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		t.Errorf("helper pathd did not exit within 15 s of SIGTERM")
	}
	d.cmd = nil
	d.log.Close()
}

// rawRead reads one frame as a Request (fake server) or Response (raw client).
func rawRead(r io.Reader, m proto.Message) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	buf := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(r, buf); err != nil {
		return err
	}
	return proto.Unmarshal(buf, m)
}

// rawWrite writes one message as a frame.
func rawWrite(w io.Writer, m proto.Message) error {
	payload, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	frame := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(frame, uint32(len(payload)))
	copy(frame[4:], payload)
	_, err = w.Write(frame)
	return err
}

// listenFake listens on an ephemeral loopback port and hands every
// connection it accepts to onConn, on the accepting goroutine (start one
// for anything that blocks); the listener and every connection accepted
// close when the test ends. It returns the address.
func listenFake(t *testing.T, onConn func(nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range open {
			nc.Close()
		}
	})
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, nc)
			mu.Unlock()
			onConn(nc)
		}
	}()
	return ln.Addr().String()
}

// readRequests hands every request read from nc to handle, until handle
// returns false or the client closes nc (then closed runs, when given).
func readRequests(nc net.Conn, closed func(), handle func(req *pb.Request) bool) {
	for {
		req := &pb.Request{}
		if rawRead(nc, req) != nil {
			if closed != nil {
				closed()
			}
			return
		}
		if !handle(req) {
			return
		}
	}
}

// fakeServer accepts connections, answers GetLimits with the cap given,
// and then hands every other request to answer, which returns the
// responses to send (none: no answer).
func fakeServer(t *testing.T, inflightCap uint32, answer func(req *pb.Request) []*pb.Response) string {
	t.Helper()
	return listenFake(t, func(nc net.Conn) {
		go readRequests(nc, nil, func(req *pb.Request) bool {
			out := []*pb.Response{limitsTo(req, inflightCap)}
			if req.GetLimits() == nil {
				out = answer(req)
			}
			for _, r := range out {
				if rawWrite(nc, r) != nil {
					nc.Close()
					return false
				}
			}
			return true
		})
	})
}

// limitsTo answers GetLimits with a cap of n (slots and batch items).
func limitsTo(req *pb.Request, n uint32) *pb.Response {
	return &pb.Response{Id: req.Id, Final: true, Body: &pb.Response_Limits{
		Limits: &pb.Limits{MaxInflightPerConn: n, MaxBatchItems: n}}}
}

func mustf(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}

func cells(p *Path) string { return fmt.Sprint(p.Cells()) }
