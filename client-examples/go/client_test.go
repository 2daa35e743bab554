// Live tests of the Go client against pathd (tests/clients.cmake runs them
// through scripts/run-with-daemon.sh): known paths on a small map made here,
// each movement query and batch, scene changes, watches, routes on the demo
// world, and the flow control (in-flight cap, bounded queue, OVERLOADED
// retried, context cancel) against daemons started with a small cap.

package pathd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "pathd.example/client/pathdpb"
)

// maze is the small test map: from (0,0) to (4,0) the only way is down
// column 1, along row 2 and up column 3; diagonals cannot cut the wall
// corners, so 4- and 8-connected paths are the same 8 steps.
//
//	..#..
//	#.#.#
//	#...#
const maze = "..#..\n#.#.#\n#...#\n"

var mazePath = [][2]int32{{0, 0}, {1, 0}, {1, 1}, {1, 2}, {2, 2}, {3, 2}, {3, 1}, {3, 0}, {4, 0}}

var sceneSeq atomic.Int64

// makeMaze creates a fresh copy of the maze on the harness's daemon.
func makeMaze(t *testing.T, c *Client) string {
	t.Helper()
	name := fmt.Sprintf("go-maze-%d-%d", os.Getpid(), sceneSeq.Add(1))
	ch, err := c.CreateScene(ctxT(t, 5*time.Second), &pb.CreateScene{Name: name, Format: "ascii", Map: []byte(maze)})
	if err != nil {
		t.Fatalf("CreateScene: %v", err)
	}
	mustf(t, ch.Version == 1, "a new scene is version 1, got %d", ch.Version)
	t.Cleanup(func() { _, _ = c.DropScene(context.Background(), &pb.DropScene{Name: name}) })
	return name
}

func TestFindPathKnownPaths(t *testing.T) {
	c := dial(t, env(t, "PATHD_ADDR"), Options{})
	scene := makeMaze(t, c)
	ctx := ctxT(t, 10*time.Second)
	for _, conn := range []pb.Connectivity{pb.Connectivity_CONNECTIVITY_4, pb.Connectivity_CONNECTIVITY_8} {
		p, err := c.FindPath(ctx, &pb.FindPath{Scene: scene, Start: Cell(0, 0), Goal: Cell(4, 0), Connectivity: conn})
		if err != nil {
			t.Fatalf("FindPath %v: %v", conn, err)
		}
		mustf(t, p.Status == pb.Status_OK && cells(p) == fmt.Sprint(mazePath), "%v: got %s %s, want %v", conn, p.Status, cells(p), mazePath)
		mustf(t, p.Cost == 8 && p.Version == 1 && p.GoalIndex == -1 && !p.HasWorld && !p.HasTimes,
			"%v: cost %g version %d goal index %d", conn, p.Cost, p.Version, p.GoalIndex)
		mustf(t, p.Timing.ServerUs >= 1, "the final frame carries server_us")
	}
	// Corners, with world coordinates and times: origin 0, cell size 1, so
	// a centre is cell + 0.5, and at speed 2 each straight step takes 0.5 s.
	p, err := c.FindPath(ctx, &pb.FindPath{Scene: scene, Start: Cell(0, 0), Goal: Cell(4, 0),
		Style: pb.WaypointStyle_STYLE_CORNERS, WantWorld: true, Speed: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]int32{{0, 0}, {1, 0}, {1, 2}, {3, 2}, {3, 0}, {4, 0}}
	mustf(t, cells(p) == fmt.Sprint(want), "corners: got %s, want %v", cells(p), want)
	last := p.Waypoints[len(p.Waypoints)-1]
	mustf(t, p.HasWorld && p.HasTimes && last.WX == 4.5 && last.WY == 0.5 && math.Abs(last.T-4) < 1e-9,
		"corners: last waypoint %+v", last)

	// The nearest of several goals: (1,2) is 3 steps away, (4,0) 8.
	p, err = c.FindPath(ctx, &pb.FindPath{Scene: scene, Start: Cell(0, 0), Goals: []*pb.Point{Cell(4, 0), Cell(1, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, p.GoalIndex == 1 && p.Cost == 3, "goals: index %d cost %g", p.GoalIndex, p.Cost)

	// Refusals are StatusErrors carrying the path answer.
	_, err = c.FindPath(ctx, &pb.FindPath{Scene: scene, Start: Cell(0, 0), Goal: Cell(2, 0)})
	mustf(t, IsStatus(err, pb.Status_GOAL_BLOCKED), "a wall goal: %v", err)
	var se *StatusError
	mustf(t, errors.As(err, &se) && se.Result.(*Path).Status == pb.Status_GOAL_BLOCKED, "the error holds the answer")
	_, err = c.FindPath(ctx, &pb.FindPath{Scene: "no-such-scene", Start: Cell(0, 0), Goal: Cell(1, 0)})
	mustf(t, IsStatus(err, pb.Status_UNKNOWN_SCENE), "an unknown scene: %v", err)
	// Snapping a blocked goal is PARTIAL, returned without error.
	p, err = c.FindPath(ctx, &pb.FindPath{Scene: scene, Start: Cell(0, 0), Goal: Cell(2, 1), Snap: true})
	mustf(t, err == nil && p.Status == pb.Status_PARTIAL && p.GoalUsed != nil, "snap: %v %+v", err, p)
}

// A long path streams in several chunks (max_waypoints_per_chunk 256 on
// the demo config): the client must put them together in order.
func TestFindPathChunked(t *testing.T) {
	c := dial(t, env(t, "PATHD_ADDR"), Options{})
	ctx := ctxT(t, 10*time.Second)
	const w, h = 600, 1
	name := fmt.Sprintf("go-line-%d", os.Getpid())
	cellsRow := make([]byte, w*h)
	for i := range cellsRow {
		cellsRow[i] = 1
	}
	if _, err := c.CreateScene(ctx, &pb.CreateScene{Name: name, Cells: cellsRow, Width: w, Height: h}); err != nil {
		t.Fatal(err)
	}
	defer c.DropScene(context.Background(), &pb.DropScene{Name: name})
	p, err := c.FindPath(ctx, &pb.FindPath{Scene: name, Start: Cell(0, 0), Goal: Cell(w-1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, len(p.Waypoints) == w, "%d waypoints, want %d", len(p.Waypoints), w)
	for i, wp := range p.Waypoints {
		if wp.X != int32(i) || wp.Y != 0 {
			t.Fatalf("waypoint %d is (%d,%d)", i, wp.X, wp.Y)
		}
	}
}

func TestValidateMoveAndQueries(t *testing.T) {
	c := dial(t, env(t, "PATHD_ADDR"), Options{})
	scene := makeMaze(t, c)
	ctx := ctxT(t, 10*time.Second)

	// Through the wall at (2,0): refused at point 1, the segment's fault.
	v, err := c.ValidateMove(ctx, &pb.ValidateMove{Scene: scene, MaxSpeed: 10, Moves: []*pb.TimedPoint{
		{Point: Cell(1, 0), T: 0}, {Point: Cell(3, 0), T: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, !v.Valid && v.FirstInvalid == 1 && v.Reason == pb.MoveReason_MOVE_BLOCKED_SEGMENT &&
		v.LastValid.GetX() == 1 && v.LastValid.GetY() == 0, "wall move: %v", v)
	// The honest way round, at speed.
	moves := []*pb.TimedPoint{}
	for i, xy := range mazePath {
		moves = append(moves, &pb.TimedPoint{Point: Cell(xy[0], xy[1]), T: float64(i)})
	}
	v, err = c.ValidateMove(ctx, &pb.ValidateMove{Scene: scene, MaxSpeed: 1, Moves: moves})
	mustf(t, err == nil && v.Valid && v.FirstInvalid == -1, "honest move: %v %v", err, v)
	// Too fast: 2 cells in 1 s at max speed 1.
	v, err = c.ValidateMove(ctx, &pb.ValidateMove{Scene: scene, MaxSpeed: 1, Moves: []*pb.TimedPoint{
		{Point: Cell(1, 2), T: 0}, {Point: Cell(3, 2), T: 1}}})
	mustf(t, err == nil && !v.Valid && v.Reason == pb.MoveReason_MOVE_TOO_FAST, "speed hack: %v %v", err, v)

	r, err := c.Raycast(ctx, &pb.Raycast{Scene: scene, From: Cell(0, 0), To: Cell(4, 0)})
	mustf(t, err == nil && !r.Clear && r.Hit.GetX() == 2 && r.LastFree.GetX() == 1, "raycast: %v %v", err, r)
	reach, err := c.IsReachable(ctx, &pb.IsReachable{Scene: scene, From: Cell(0, 0), To: Cell(4, 0)})
	mustf(t, err == nil && reach.Reachable, "reachable: %v %v", err, reach)
	n, err := c.NearestWalkable(ctx, &pb.NearestWalkable{Scene: scene, At: Cell(2, 1), Radius: 2})
	// (1,1) and (3,1) are both 1 away: ties go to the smaller x.
	mustf(t, err == nil && n.Distance == 1 && n.Cell.GetX() == 1 && n.Cell.GetY() == 1, "nearest: %v %v", err, n)
	m, err := c.MoveAlong(ctx, &pb.MoveAlong{Scene: scene, From: Cell(1, 2), Dx: 3, Dy: 0})
	mustf(t, err == nil && m.Slid && m.End.GetX() == 3, "move along: %v %v", err, m)
	d, err := c.DistanceToWall(ctx, &pb.DistanceToWall{Scene: scene, At: Cell(0, 0)})
	mustf(t, err == nil && d.Distance == 1, "distance to wall: %v %v", err, d)
	rp1, err1 := c.RandomPoint(ctx, &pb.RandomPoint{Scene: scene, Around: Cell(0, 0), Radius: 8, Seed: 7})
	rp2, err2 := c.RandomPoint(ctx, &pb.RandomPoint{Scene: scene, Around: Cell(0, 0), Radius: 8, Seed: 7})
	mustf(t, err1 == nil && err2 == nil && rp1.Cell.GetX() == rp2.Cell.GetX() && rp1.Cell.GetY() == rp2.Cell.GetY() &&
		rp1.Candidates == 9, "random point: %v %v %v", err1, rp1, rp2)

	// The same queries in one batch answer the same.
	items := []*pb.Query{
		Q(&pb.Raycast{Scene: scene, From: Cell(0, 0), To: Cell(4, 0)}),
		Q(&pb.ValidateMove{Scene: scene, MaxSpeed: 10, Moves: []*pb.TimedPoint{{Point: Cell(1, 0)}, {Point: Cell(3, 0), T: 1}}}),
		Q(&pb.FindPath{Scene: scene, Start: Cell(0, 0), Goal: Cell(4, 0)}),
		Q(&pb.IsReachable{Scene: scene, From: Cell(0, 0), To: Cell(4, 0)}),
		Q(&pb.FindPath{Scene: "no-such-scene", Start: Cell(0, 0), Goal: Cell(4, 0)}),
	}
	res, err := c.Batch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, res[0].GetRaycast().GetHit().GetX() == 2, "batch raycast: %v", res[0])
	mustf(t, res[1].GetValidateMove().GetReason() == pb.MoveReason_MOVE_BLOCKED_SEGMENT, "batch validate: %v", res[1])
	bp, err := ItemPath(items[2], res[2])
	mustf(t, err == nil && cells(bp) == fmt.Sprint(mazePath) && bp.Cost == 8, "batch path: %v %v", err, bp)
	mustf(t, res[3].GetReachable().GetReachable(), "batch reachable: %v", res[3])
	mustf(t, res[4].Status == pb.Status_UNKNOWN_SCENE, "a failed item has its own status: %v", res[4])
}

func TestScenesUpdatesAndWatch(t *testing.T) {
	c := dial(t, env(t, "PATHD_ADDR"), Options{})
	scene := makeMaze(t, c)
	ctx := ctxT(t, 10*time.Second)

	g, err := c.SceneGrid(ctx, scene, 0)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for y := 0; y < g.Height; y++ {
		row := ""
		for _, b := range g.Cells[y*g.Width : (y+1)*g.Width] {
			row += map[bool]string{true: "#", false: "."}[b == 0]
		}
		rows = append(rows, row)
	}
	mustf(t, strings.Join(rows, "\n")+"\n" == maze, "grid:\n%s", strings.Join(rows, "\n"))
	info, err := c.SceneInfo(ctx, &pb.GetSceneInfo{Scene: scene})
	mustf(t, err == nil && info.Width == 5 && info.Height == 3 && info.PassableCells == 9, "info: %v %v", err, info)
	list, err := c.Scenes(ctx)
	found := false
	for _, s := range list {
		found = found || s.Name == scene
	}
	mustf(t, err == nil && found, "Scenes lists %s: %v", scene, err)

	w, err := c.Watch(ctx, scene)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := w.Next(ctx)
	mustf(t, err == nil && ev.Kind == pb.WatchEventKind_WATCH_STARTED && ev.Version == 1, "first event: %v %v", err, ev)

	// Open the wall at (2,0): the straight path, on version 2.
	u, err := c.UpdateCells(ctx, &pb.UpdateCells{Scene: scene, Op: pb.UpdateOp_UPDATE_PASS,
		Target: &pb.UpdateCells_Cells{Cells: &pb.CellList{Cells: []*pb.Cell{{X: 2, Y: 0}}}}})
	mustf(t, err == nil && u.Version == 2 && u.CellsChanged == 1, "update: %v %v", err, u)
	p, err := c.FindPath(ctx, &pb.FindPath{Scene: scene, Start: Cell(0, 0), Goal: Cell(4, 0), MinVersion: u.Version})
	mustf(t, err == nil && p.Cost == 4 && p.Version == 2, "after the update: %v %v", err, p)
	_, err = c.FindPath(ctx, &pb.FindPath{Scene: scene, Start: Cell(0, 0), Goal: Cell(4, 0), MinVersion: 9})
	var se *StatusError
	mustf(t, errors.As(err, &se) && se.Status == pb.Status_STALE_VERSION && se.Version == 2, "stale: %v", err)

	ev, err = w.Next(ctx)
	mustf(t, err == nil && ev.Kind == pb.WatchEventKind_SCENE_UPDATED && ev.Version == 2 && ev.CellsChanged == 1,
		"update event: %v %v", err, ev)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ev, err = w.Next(ctx)
	mustf(t, err == nil && ev.Kind == pb.WatchEventKind_WATCH_ENDED, "last event: %v %v", err, ev)
	_, err = w.Next(ctx)
	mustf(t, errors.Is(err, io.EOF), "after the last event: %v", err)
	_, err = c.Watch(ctx, "no-such-scene")
	mustf(t, IsStatus(err, pb.Status_UNKNOWN_SCENE), "watching an unknown scene: %v", err)

	inst := scene + "-copy"
	ch, err := c.CreateInstance(ctx, &pb.CreateInstance{Name: inst, Template: scene})
	mustf(t, err == nil && ch.Version == 1, "instance: %v %v", err, ch)
	_, err = c.CreateInstance(ctx, &pb.CreateInstance{Name: inst, Template: scene})
	mustf(t, IsStatus(err, pb.Status_SCENE_EXISTS), "instance twice: %v", err)
	_, err = c.DropScene(ctx, &pb.DropScene{Name: inst})
	mustf(t, err == nil, "drop: %v", err)
}

// The reservation calls against the live daemon (docs/PROTOCOL.md,
// "Reservations"): a plan reserved through the maze, START_BLOCKED naming
// the agent that holds the start, the table listed, FindPath around it, an
// update that cuts the plan (its AGENTS_CUT watch event), the release, and
// each call counted as the in-flight slot the server
// counts it as.
func TestReservations(t *testing.T) {
	c := dial(t, env(t, "PATHD_ADDR"), Options{})
	scene := makeMaze(t, c)
	ctx := ctxT(t, 10*time.Second)

	r, err := c.ReservePath(ctx, &pb.ReservePath{Scene: scene, Agent: 1, Start: Cell(0, 0), Goal: Cell(4, 0),
		T0Ms: 1000, Speed: 2, Window: &pb.ReservePath_WindowMs{WindowMs: 20000}})
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, r.Agent == 1 && r.ReservedUntilMs == -1 && len(r.Waypoints) == len(mazePath),
		"reserved: agent %d until %d, %d waypoints", r.Agent, r.ReservedUntilMs, len(r.Waypoints))
	for i, w := range r.Waypoints {
		mustf(t, w.X == mazePath[i][0] && w.Y == mazePath[i][1], "waypoint %d at (%d,%d), want %v", i, w.X, w.Y, mazePath[i])
		if i > 0 {
			mustf(t, w.TArriveMs >= r.Waypoints[i-1].TLeaveMs+500, "step %d faster than 2 cells/s: %v", i, w)
		}
	}
	mustf(t, r.Waypoints[0].TArriveMs == 1000, "the plan starts at t0: %v", r.Waypoints[0])

	// Another agent cannot start where agent 1 stands at t0.
	_, err = c.ReservePath(ctx, &pb.ReservePath{Scene: scene, Agent: 2, Start: Cell(0, 0), Goal: Cell(1, 2),
		T0Ms: 1000, Speed: 2})
	var se *StatusError
	mustf(t, errors.As(err, &se) && se.Status == pb.Status_START_BLOCKED, "agent 2 at agent 1's start: %v", err)
	blocked, ok := se.Result.(*pb.ReservePathResult)
	mustf(t, ok && blocked.HasBlockingAgent && blocked.BlockingAgent == 1 && len(blocked.Waypoints) == 0,
		"START_BLOCKED names agent 1: %v", se.Result)
	_, err = c.ReservePath(ctx, &pb.ReservePath{Scene: scene, Agent: 0, Start: Cell(0, 0), Goal: Cell(4, 0), Speed: 2})
	mustf(t, IsStatus(err, pb.Status_INVALID_ARGUMENT), "agent 0: %v", err)

	list, err := c.GetReservations(ctx, &pb.GetReservations{Scene: scene})
	mustf(t, err == nil && list.Agents == 1 && len(list.Entries) > 0 && list.Matching == uint64(len(list.Entries)),
		"the table: %v %v", err, list)
	for _, e := range list.Entries {
		mustf(t, e.Agent == 1, "an entry of agent %d", e.Agent)
	}
	goal, err := c.GetReservations(ctx, &pb.GetReservations{Scene: scene,
		Rect: &pb.Rect{Min: &pb.Cell{X: 4, Y: 0}, Max: &pb.Cell{X: 4, Y: 0}}})
	mustf(t, err == nil && len(goal.Entries) > 0, "the goal's entries: %v %v", err, goal)
	last := goal.Entries[len(goal.Entries)-1]
	mustf(t, last.X == 4 && last.Width == 1 && last.T1Ms == -1, "the goal is held for good: %v %v", err, goal)
	_, err = c.GetReservations(ctx, &pb.GetReservations{Scene: "no-such-scene"})
	mustf(t, IsStatus(err, pb.Status_UNKNOWN_SCENE), "unknown scene: %v", err)

	// FindPath around the reservations (AvoidReserved): ahead of agent 1
	// along the bottom row, timed, and nothing reserved.
	p, err := c.FindPath(ctx, &pb.FindPath{Scene: scene, Start: Cell(1, 2), Goal: Cell(3, 2), Speed: 2,
		StartTime: 1.0, AvoidReserved: true})
	mustf(t, err == nil && p.HasTimes && len(p.Waypoints) >= 3, "FindPath avoid_reserved: %v %v", err, p)
	after, err := c.GetReservations(ctx, &pb.GetReservations{Scene: scene})
	mustf(t, err == nil && after.TableEntries == list.TableEntries, "FindPath reserved nothing: %v %v", err, after)

	// Blocking a cell of agent 1's path cuts it: the update says so, and a
	// watcher hears SCENE_UPDATED, then AGENTS_CUT naming it.
	w, err := c.Watch(ctx, scene)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := w.Next(ctx)
	mustf(t, err == nil && ev.Kind == pb.WatchEventKind_WATCH_STARTED, "started: %v %v", err, ev)
	u, err := c.UpdateCells(ctx, &pb.UpdateCells{Scene: scene, Op: pb.UpdateOp_UPDATE_BLOCK,
		Target:  &pb.UpdateCells_Cells{Cells: &pb.CellList{Cells: []*pb.Cell{{X: 3, Y: 1}}}},
		CutTime: &pb.UpdateCells_AtMs{AtMs: 1000}})
	mustf(t, err == nil && fmt.Sprint(u.AgentsCut) == "[1]", "the cut: %v %v", err, u)
	ev, err = w.Next(ctx)
	mustf(t, err == nil && ev.Kind == pb.WatchEventKind_SCENE_UPDATED && ev.Version == u.Version, "updated: %v %v", err, ev)
	ev, err = w.Next(ctx)
	mustf(t, err == nil && ev.Kind == pb.WatchEventKind_AGENTS_CUT && ev.Version == u.Version &&
		fmt.Sprint(ev.Agents) == "[1]" && ev.CutAtMs == 1000, "agents cut: %v %v", err, ev)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	rel, err := c.ReleaseAgent(ctx, &pb.ReleaseAgent{Scene: scene, Agent: 1})
	mustf(t, err == nil && rel.Released, "release: %v %v", err, rel)
	rel, err = c.ReleaseAgent(ctx, &pb.ReleaseAgent{Scene: scene, Agent: 1})
	mustf(t, err == nil && !rel.Released, "release again: %v %v", err, rel)
	list, err = c.GetReservations(ctx, &pb.GetReservations{Scene: scene})
	mustf(t, err == nil && list.Agents == 0 && len(list.Entries) == 0, "after the release: %v %v", err, list)

	// Every agent at once, and the scene's clock with them: a clock from 0
	// is refused while agents reserved at 100000 are held, taken after.
	for i, at := range [][2]int32{{0, 0}, {4, 0}} {
		_, err = c.ReservePath(ctx, &pb.ReservePath{Scene: scene, Agent: uint64(5 + i), Start: Cell(at[0], at[1]),
			Goal: Cell(at[0], at[1]), T0Ms: 100000, Speed: 2})
		mustf(t, err == nil, "agent %d at 100000: %v", 5+i, err)
	}
	_, err = c.ReservePath(ctx, &pb.ReservePath{Scene: scene, Agent: 7, Start: Cell(1, 2), Goal: Cell(1, 2), Speed: 2})
	mustf(t, IsStatus(err, pb.Status_INVALID_ARGUMENT), "a clock gone back: %v", err)
	rel, err = c.ReleaseAll(ctx, scene)
	mustf(t, err == nil && rel.Released && rel.AgentsReleased == 2, "release all: %v %v", err, rel)
	_, err = c.ReservePath(ctx, &pb.ReservePath{Scene: scene, Agent: 7, Start: Cell(1, 2), Goal: Cell(1, 2), Speed: 2})
	mustf(t, err == nil, "the clock from 0 after release all: %v", err)
	rel, err = c.ReleaseAll(ctx, scene)
	mustf(t, err == nil && rel.AgentsReleased == 1, "release all again: %v %v", err, rel)

	for _, req := range []*pb.Request{{Body: &pb.Request_ReservePath{}}, {Body: &pb.Request_ReleaseAgent{}},
		{Body: &pb.Request_Reservations{}}} {
		mustf(t, weightOf(req) == 1, "%T takes one in-flight slot on the server", req.Body)
	}
}

// Standing agents moved aside (ReservePath.YieldAfterMs): in a one-wide
// corridor with a side pocket above (8, 1), B (2) stands at (8, 1) from 0
// and A (1) at (6, 1) from 1000. At 4000 B (stood 4000 ms, A 3000) heads
// for the left room: without YieldAfterMs nobody moves; with it A is moved
// aside, the answer's Displaced carries A's new plan (which the table now
// holds), and a watcher hears AGENTS_DISPLACED.
func TestReservationsYield(t *testing.T) {
	c := dial(t, env(t, "PATHD_ADDR"), Options{})
	ctx := ctxT(t, 10*time.Second)
	scene := fmt.Sprintf("go-corridor-%d-%d", os.Getpid(), sceneSeq.Add(1))
	if _, err := c.CreateScene(ctx, &pb.CreateScene{Name: scene, Format: "ascii",
		Map: []byte("...#####.###...\n...............\n...#########...\n")}); err != nil {
		t.Fatalf("CreateScene: %v", err)
	}
	t.Cleanup(func() { _, _ = c.DropScene(context.Background(), &pb.DropScene{Name: scene}) })
	w, err := c.Watch(ctx, scene)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := w.Next(ctx)
	mustf(t, err == nil && ev.Kind == pb.WatchEventKind_WATCH_STARTED, "started: %v %v", err, ev)
	stand := func(agent uint64, x int32, t0 int64) {
		r, err := c.ReservePath(ctx, &pb.ReservePath{Scene: scene, Agent: agent, Start: Cell(x, 1), Goal: Cell(x, 1),
			T0Ms: t0, Speed: 1})
		mustf(t, err == nil && len(r.Displaced) == 0, "agent %d stands: %v %v", agent, err, r)
	}
	stand(2, 8, 0)
	stand(1, 6, 1000)
	ask := &pb.ReservePath{Scene: scene, Agent: 2, Start: Cell(8, 1), Goal: Cell(1, 1), T0Ms: 4000, Speed: 1,
		Window: &pb.ReservePath_WindowMs{WindowMs: 4000}}
	r, err := c.ReservePath(ctx, ask)
	mustf(t, err == nil && len(r.Displaced) == 0, "without YieldAfterMs: %v %v", err, r)
	ask.YieldAfterMs = 2000
	r, err = c.ReservePath(ctx, ask)
	mustf(t, err == nil && len(r.Displaced) == 1 && r.Displaced[0].Agent == 1, "with YieldAfterMs: %v %v", err, r)
	d := r.Displaced[0]
	first, last := d.Waypoints[0], d.Waypoints[len(d.Waypoints)-1]
	mustf(t, first.X == 6 && first.Y == 1 && first.TArriveMs == d.T0Ms && d.ReservedUntilMs == last.TLeaveMs,
		"A's new plan starts where it stood, at its t0: %v", d)
	held, err := c.GetReservations(ctx, &pb.GetReservations{Scene: scene,
		Rect: &pb.Rect{Min: &pb.Cell{X: last.X, Y: last.Y}, Max: &pb.Cell{X: last.X, Y: last.Y}}})
	mustf(t, err == nil && len(held.Entries) > 0 && held.Entries[len(held.Entries)-1].Agent == 1,
		"the table holds A where it was moved: %v %v", err, held)
	ev, err = w.Next(ctx)
	mustf(t, err == nil && ev.Kind == pb.WatchEventKind_AGENTS_DISPLACED && ev.Version == r.SceneVersion &&
		fmt.Sprint(ev.Agents) == "[1]", "agents displaced: %v %v", err, ev)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = c.ReservePath(ctx, &pb.ReservePath{Scene: scene, Agent: 3, Start: Cell(0, 0), Goal: Cell(0, 0),
		Speed: 1, YieldAfterMs: -1})
	mustf(t, IsStatus(err, pb.Status_INVALID_ARGUMENT), "yield_after_ms -1: %v", err)
}

// A watch whose events are not read ends with WATCH_OVERFLOW past
// Options.WatchBuffer, as the server ends one whose socket is not read; the
// events queued before stay readable.
func TestWatchOverflow(t *testing.T) {
	c := dial(t, env(t, "PATHD_ADDR"), Options{Conns: 1, WatchBuffer: 2})
	scene := makeMaze(t, c)
	ctx := ctxT(t, 10*time.Second)
	w, err := c.Watch(ctx, scene)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		op := pb.UpdateOp_UPDATE_PASS
		if i%2 == 1 {
			op = pb.UpdateOp_UPDATE_BLOCK
		}
		if _, err := c.UpdateCells(ctx, &pb.UpdateCells{Scene: scene, Op: op,
			Target: &pb.UpdateCells_Cells{Cells: &pb.CellList{Cells: []*pb.Cell{{X: 2, Y: 0}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.end != nil }, "the watch to end")
	ev1, err1 := w.Next(ctx)
	ev2, err2 := w.Next(ctx)
	mustf(t, err1 == nil && err2 == nil && ev1.Kind == pb.WatchEventKind_WATCH_STARTED && ev2.Version == 2,
		"the queued events: %v %v / %v %v", ev1, err1, ev2, err2)
	_, err = w.Next(ctx)
	mustf(t, IsStatus(err, pb.Status_WATCH_OVERFLOW) && strings.Contains(err.Error(), "WatchBuffer"), "then: %v", err)
	// The client unwatched it on the server: the watch's final frame came.
	waitFor(t, func() bool {
		w.cn.mu.Lock()
		defer w.cn.mu.Unlock()
		return w.cn.calls[w.ID] == nil
	}, "the server's last frame of the watch")
}

// Routes, server calls and a cross-check with pathctl, the reference
// client, on the demo world.
func TestDemoWorld(t *testing.T) {
	c := dial(t, env(t, "PATHD_ADDR"), Options{})
	ctx := ctxT(t, 10*time.Second)
	rt, err := c.FindRoute(ctx, &pb.FindRoute{FromScene: "town", Start: Cell(1, 1), ToScene: "house", Goal: Cell(5, 4)})
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, len(rt.Legs) == 2 && rt.Legs[0].Scene == "town" && rt.Legs[0].Portal.GetName() == "inn-door" &&
		rt.Legs[1].Scene == "house" && int(rt.Result.Legs) == 2, "route: %+v", rt)
	lastLeg := rt.Legs[1].Waypoints
	mustf(t, lastLeg[len(lastLeg)-1].X == 5 && lastLeg[len(lastLeg)-1].Y == 4, "the route ends at the goal")

	if d, err := c.Ping(ctx); err != nil || d <= 0 {
		t.Fatalf("ping: %v %v", d, err)
	}
	lim, err := c.GetLimits(ctx)
	mustf(t, err == nil && lim.MaxInflightPerConn == c.Limits().MaxInflightPerConn && lim.MaxInflightPerConn > 0, "limits: %v", err)
	// The reservation limits, at their defaults (config/README.md).
	mustf(t, lim.GetReservationTtlMs() == 30000 && lim.GetMaxAgentsPerScene() == 10000 &&
		lim.GetMaxReservationEntries() == 1000000 && lim.GetMaxReservationWindowMs() == 60000 &&
		lim.GetMaxAgentBytes() == 1048576 && lim.GetMaxClockStepMs() == 3600000, "reservation limits: %v", lim)
	st, err := c.Stats(ctx)
	mustf(t, err == nil && st.Connections >= 2 && st.RequestsTotal > 0, "stats: %v %v", err, st)

	pathctl := os.Getenv("PATHCTL_BIN")
	if pathctl == "" {
		t.Fatal("PATHCTL_BIN is not set (ctest sets it)")
	}
	out, err := exec.Command(pathctl, "--server", env(t, "PATHD_ADDR"), "path", "--scene", "town",
		"--from", "1,1", "--to", "30,20", "--json").Output()
	if err != nil {
		t.Fatalf("pathctl: %v", err)
	}
	p, err := c.FindPath(ctx, &pb.FindPath{Scene: "town", Start: Cell(1, 1), Goal: Cell(30, 20)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range p.Waypoints {
		got = append(got, fmt.Sprintf("[%d,%d]", w.X, w.Y))
	}
	compact := strings.Join(strings.Fields(string(out)), "")
	mustf(t, strings.Contains(compact, `"waypoints":[`+strings.Join(got, ",")+`]`),
		"the Go client's path differs from pathctl's:\n%s\n%s", strings.Join(got, ","), out)
}

// Sent all at once, far more requests than the cap never get OVERLOADED
// from the server, and every answer arrives. The control shows that the
// same load sent without flow control is refused by this daemon.
func TestFlowControlNeverOverloads(t *testing.T) {
	const capPerConn = 4
	d := startDaemon(t, map[string]any{"max_inflight_per_conn": capPerConn}, "127.0.0.1:0")
	ctx := ctxT(t, 60*time.Second)

	// Control: 32 requests written at once on a plain socket.
	nc, err := net.Dial("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	var batch []byte
	for i := 1; i <= 32; i++ {
		var b bytes.Buffer
		_ = rawWrite(&b, &pb.Request{Id: uint64(i), Body: &pb.Request_Raycast{Raycast: &pb.Raycast{
			Scene: "trap", From: Cell(0, 0), To: Cell(trapSide-1, trapSide-1)}}})
		batch = append(batch, b.Bytes()...)
	}
	if _, err := nc.Write(batch); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := 0; i < 32; i++ {
		r := &pb.Response{}
		if err := rawRead(nc, r); err != nil {
			t.Fatal(err)
		}
		if r.Status == pb.Status_OVERLOADED {
			refused++
		}
	}
	nc.Close()
	mustf(t, refused > 0, "control: 32 requests at once on a cap of %d, none refused", capPerConn)

	c := dial(t, d.addr, Options{Conns: 2})
	mustf(t, c.Limits().MaxInflightPerConn == capPerConn, "the cap read at connect: %d", c.Limits().MaxInflightPerConn)
	before, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	var wg sync.WaitGroup
	var maxSlots atomic.Int64
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var err error
			switch i % 3 {
			case 0: // a batch of 3 items takes 3 slots
				var res []*pb.QueryResult
				res, err = c.Batch(ctx, []*pb.Query{
					Q(&pb.Raycast{Scene: "trap", From: Cell(0, 0), To: Cell(5, 5)}),
					Q(&pb.IsReachable{Scene: "trap", From: Cell(0, 0), To: Cell(trapSide-1, 0)}),
					Q(&pb.FindPath{Scene: "town", Start: Cell(1, 1), Goal: Cell(10, 5)}),
				})
				for _, r := range res {
					if err == nil && r.Status != pb.Status_OK {
						err = fmt.Errorf("batch item: %v", r.Status)
					}
				}
			case 1:
				_, err = c.FindPath(ctx, &pb.FindPath{Scene: "trap", Start: Cell(0, 0), Goal: Cell(trapSide/2+1, 0),
					Style: pb.WaypointStyle_STYLE_CORNERS, MaxExpansions: 20000, PartialOnCutoff: true})
			default:
				_, err = c.Raycast(ctx, &pb.Raycast{Scene: "town", From: Cell(1, 1), To: Cell(5, 5)})
			}
			slots, _ := c.InFlight()
			for {
				m := maxSlots.Load()
				if int64(slots) <= m || maxSlots.CompareAndSwap(m, int64(slots)) {
					break
				}
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a request failed: %v", err)
		}
	}
	after, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, c.Overloaded() == 0 && c.Retries() == 0, "the client got %d OVERLOADED answers", c.Overloaded())
	mustf(t, after.OverloadedTotal == before.OverloadedTotal,
		"the server answered OVERLOADED %d times", after.OverloadedTotal-before.OverloadedTotal)
	mustf(t, maxSlots.Load() <= 2*capPerConn, "%d slots taken at once, cap %d x 2", maxSlots.Load(), capPerConn)
	slots, queued := c.InFlight()
	mustf(t, slots == 0 && queued == 0, "after the run: %d slots, %d queued", slots, queued)
	t.Logf("%d requests over 2 connections of cap %d: 0 OVERLOADED (control: %d of 32 refused without flow control)",
		n, capPerConn, refused)

	// A batch larger than the cap could never be admitted.
	big := make([]*pb.Query, capPerConn+1)
	for i := range big {
		big[i] = Q(&pb.IsReachable{Scene: "town", From: Cell(1, 1), To: Cell(2, 2)})
	}
	_, err = c.Batch(ctx, big)
	mustf(t, errors.Is(err, ErrTooLarge), "a batch over the cap: %v", err)
}

// A reload that lowers the server's cap: the first OVERLOADED answers make
// the client read GetLimits again, and from then on it keeps to the new cap.
func TestCapLoweredByReload(t *testing.T) {
	d := startDaemon(t, map[string]any{"max_inflight_per_conn": 16}, "127.0.0.1:0")
	c := dial(t, d.addr, Options{Conns: 1})
	ctx := ctxT(t, 60*time.Second)
	mustf(t, c.Limits().MaxInflightPerConn == 16, "cap at connect: %d", c.Limits().MaxInflightPerConn)
	cfgPath := filepath.Join(d.dir, "pathd.json")
	cfg := readConfig(t, cfgPath)
	cfg["limits"].(map[string]any)["max_inflight_per_conn"] = 2
	raw, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { l, err := c.GetLimits(ctx); return err == nil && l.MaxInflightPerConn == 2 }, "the reload")

	wave := func() {
		var wg sync.WaitGroup
		errs := make(chan error, 24)
		for i := 0; i < 24; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.FindPath(ctx, &pb.FindPath{Scene: "trap", Start: Cell(0, 0), Goal: Cell(trapSide/2+1, 0),
					Style: pb.WaypointStyle_STYLE_CORNERS, MaxExpansions: 50000, PartialOnCutoff: true})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a request failed: %v", err)
			}
		}
	}
	// Under load the requests may trickle in slowly enough to be answered
	// one by one: send waves until the server refuses some.
	for i := 0; i < 5 && c.Overloaded() == 0; i++ {
		wave()
	}
	first := c.Overloaded()
	mustf(t, first > 0, "16 at once on a cap of 2 drew no OVERLOADED: the client cannot have known of the reload")
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.conns[0].cap == 2 }, "the cap read again")
	wave()
	mustf(t, c.Overloaded() == first, "%d more OVERLOADED after the cap was read again", c.Overloaded()-first)
}

// With every slot held, requests queue; past QueueLimit a call fails at
// once with ErrQueueFull; cancelling a queued call takes it out of the
// queue; once the slots are free the queued calls are answered.
func TestQueueFullAndCancel(t *testing.T) {
	c := dial(t, env(t, "PATHD_ADDR"), Options{Conns: 1, InflightCap: 4, QueueLimit: 3})
	ctx := ctxT(t, 20*time.Second)
	held, err := c.acquire(ctx, 4) // the whole cap, as 4 requests in flight would
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan error, 3)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := c.Raycast(ctx, &pb.Raycast{Scene: "town", From: Cell(1, 1), To: Cell(5, 5)})
			results <- err
		}()
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := c.Raycast(cctx, &pb.Raycast{Scene: "town", From: Cell(1, 1), To: Cell(5, 5)})
		results <- err
	}()
	waitFor(t, func() bool { _, q := c.InFlight(); return q == 3 }, "3 queued")
	_, err = c.Raycast(ctx, &pb.Raycast{Scene: "town", From: Cell(1, 1), To: Cell(5, 5)})
	mustf(t, errors.Is(err, ErrQueueFull), "a 4th request with QueueLimit 3: %v", err)
	mustf(t, strings.Contains(err.Error(), "QueueLimit"), "the error says what to change: %v", err)
	// Ping takes no slot: it is never queued.
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("ping with the cap held: %v", err)
	}
	cancel()
	err = <-results
	mustf(t, errors.Is(err, context.Canceled), "the cancelled queued call: %v", err)
	waitFor(t, func() bool { _, q := c.InFlight(); return q == 2 }, "the cancelled call leaves the queue")
	c.release(held, 4)
	for i := 0; i < 2; i++ {
		if err := <-results; err != nil {
			t.Fatalf("a queued call: %v", err)
		}
	}
	waitFor(t, func() bool { s, q := c.InFlight(); return s == 0 && q == 0 }, "all slots free")
}

// Cancelling a request in flight returns at once and cancels it on the
// server; its slot is free again once the server's answer comes. (A search
// that ends before the cancel is tried again, up to 5 times.)
func TestCancelInFlight(t *testing.T) {
	d := startDaemon(t, map[string]any{}, "127.0.0.1:0")
	c := dial(t, d.addr, Options{Conns: 1})
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			// Across the trap's wall with no budget: a long A* search.
			_, err := c.FindPath(ctx, &pb.FindPath{Scene: "trap", Start: Cell(0, 0), Goal: Cell(trapSide-1, 0)})
			errc <- err
		}()
		var err error
		done := false
		for !done {
			if s, _ := c.InFlight(); s == 1 {
				break
			}
			select {
			case err = <-errc:
				done = true
			case <-time.After(time.Millisecond):
			}
		}
		if !done {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(2 * time.Second):
				t.Fatal("a cancelled call did not return")
			}
		}
		cancel()
		if err == nil && attempt < 5 {
			continue // it finished before the cancel
		}
		mustf(t, errors.Is(err, context.Canceled), "cancelled call: %v", err)
		break
	}
	waitFor(t, func() bool { s, _ := c.InFlight(); return s == 0 }, "the slot back after the answer")
	st, err := c.Stats(ctxT(t, 5*time.Second))
	mustf(t, err == nil && st.InFlight == 0, "the server has nothing in flight: %v %v", err, st)
}

// Against a server that answers only when cancelled: a call whose context
// is cancelled, or whose deadline passes, returns at once and sends Cancel
// for its request; the slot comes back with the CANCELLED answer.
func TestCancelSent(t *testing.T) {
	cancels := make(chan uint64, 4)
	addr := fakeServer(t, 8, func(req *pb.Request) []*pb.Response {
		if cl := req.GetCancel(); cl != nil {
			cancels <- cl.TargetId
			return []*pb.Response{{Id: req.Id, Final: true},
				{Id: cl.TargetId, Final: true, Status: pb.Status_CANCELLED, Body: &pb.Response_Path{Path: &pb.PathChunk{}}}}
		}
		return nil // FindPath: never answered unless cancelled
	})
	c := dial(t, addr, Options{Conns: 1})
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancel", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		ctx, cancel := tc.ctx()
		errc := make(chan error, 1)
		go func() {
			_, err := c.FindPath(ctx, &pb.FindPath{Scene: "hang", Start: Cell(0, 0), Goal: Cell(1, 1)})
			errc <- err
		}()
		if tc.want == context.Canceled {
			waitFor(t, func() bool { s, _ := c.InFlight(); return s == 1 }, tc.name+": in flight")
			cancel()
		}
		select {
		case err := <-errc:
			mustf(t, errors.Is(err, tc.want), "%s: %v", tc.name, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the call did not return", tc.name)
		}
		cancel()
		select {
		case target := <-cancels:
			mustf(t, target > 0, "%s: Cancel names the request", tc.name)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no Cancel reached the server", tc.name)
		}
		waitFor(t, func() bool { s, _ := c.InFlight(); return s == 0 }, tc.name+": the slot back after CANCELLED")
	}
}

// OVERLOADED from the server is retried with backoff and succeeds; one
// that persists fails with the status once the deadline is near.
func TestOverloadedRetried(t *testing.T) {
	var calls atomic.Int64
	addr := fakeServer(t, 8, func(req *pb.Request) []*pb.Response {
		if req.GetRaycast() == nil {
			return nil
		}
		n := calls.Add(1)
		if req.GetRaycast().Scene == "always" || n <= 2 {
			return []*pb.Response{{Id: req.Id, Final: true, Status: pb.Status_OVERLOADED,
				Body: &pb.Response_Error{Error: &pb.Error{Message: "the job queue is full"}}}}
		}
		return []*pb.Response{{Id: req.Id, Final: true, Body: &pb.Response_Raycast{Raycast: &pb.RaycastResult{Clear: true, Version: 3}}}}
	})
	c := dial(t, addr, Options{Conns: 1})
	r, err := c.Raycast(ctxT(t, 5*time.Second), &pb.Raycast{Scene: "x", From: Cell(0, 0), To: Cell(1, 1)})
	mustf(t, err == nil && r.Clear && r.Version == 3, "after two OVERLOADED: %v %v", err, r)
	mustf(t, c.Overloaded() == 2 && c.Retries() == 2, "overloaded %d retries %d", c.Overloaded(), c.Retries())

	// The retry deadline here is RetryTimeout (the context has none), so
	// no attempt is cut short by the context: the call ends when the next
	// back-off would pass the deadline, with the status, whatever the
	// machine's speed. Before, a 300 ms context on a loaded machine ran
	// out during a round trip (DeadlineExceeded, not OVERLOADED) or left
	// room for one retry only. 2 s of back-off doubling from 10 ms up to
	// 500 ms allow a handful of retries, and a loaded machine at least two.
	c2 := dial(t, addr, Options{Conns: 1, RetryTimeout: 2 * time.Second})
	_, err = c2.Raycast(context.Background(), &pb.Raycast{Scene: "always", From: Cell(0, 0), To: Cell(1, 1)})
	mustf(t, IsStatus(err, pb.Status_OVERLOADED), "persistent OVERLOADED: %v", err)
	mustf(t, c2.Retries() >= 2 && c2.Retries() < 20, "retried until the deadline, not past it: %d retries", c2.Retries())
	mustf(t, c2.Overloaded() == c2.Retries()+1, "each refusal but the last retried: overloaded %d retries %d",
		c2.Overloaded(), c2.Retries())
}

// A server that breaks the protocol gets the connection closed: path chunks
// out of sequence, a frame above MaxFrameBytes. A path split over chunks
// in sequence is put together.
func TestProtocolErrors(t *testing.T) {
	chunk := func(id uint64, seq uint32, final bool, xs ...int32) *pb.Response {
		dy := make([]int32, len(xs))
		return &pb.Response{Id: id, Final: final, Body: &pb.Response_Path{Path: &pb.PathChunk{Seq: seq,
			Points: &pb.Waypoints{Dx: xs, Dy: dy}, Cost: 3, TotalWaypoints: map[bool]uint32{true: 4}[final]}}}
	}
	addr := fakeServer(t, 8, func(req *pb.Request) []*pb.Response {
		switch req.GetFindPath().GetScene() {
		case "good": // cells 0,1 then 2,3, delta-coded per chunk
			return []*pb.Response{chunk(req.Id, 0, false, 0, 1), chunk(req.Id, 1, true, 2, 1)}
		case "skip":
			return []*pb.Response{chunk(req.Id, 1, true, 0)}
		}
		return nil
	})
	c := dial(t, addr, Options{Conns: 1})
	ctx := ctxT(t, 5*time.Second)
	p, err := c.FindPath(ctx, &pb.FindPath{Scene: "good", Start: Cell(0, 0), Goal: Cell(3, 0)})
	mustf(t, err == nil && cells(p) == "[[0 0] [1 0] [2 0] [3 0]]" && p.Cost == 3, "two chunks: %v %v", err, p)
	_, err = c.FindPath(ctx, &pb.FindPath{Scene: "skip", Start: Cell(0, 0), Goal: Cell(3, 0)})
	mustf(t, errors.Is(err, ErrProtocol) && strings.Contains(err.Error(), "expected 0"), "chunk 1 first: %v", err)

	// A header of 4 GiB is refused before anything is buffered.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		req := &pb.Request{}
		_ = rawRead(nc, req)
		_, _ = nc.Write([]byte{0xff, 0xff, 0xff, 0xff})
		time.Sleep(time.Second)
	}()
	_, err = Dial(ctx, ln.Addr().String(), Options{Conns: 1})
	mustf(t, errors.Is(err, ErrProtocol) && strings.Contains(err.Error(), "4294967295-byte frame"), "a 4 GiB frame: %v", err)
}

// A lost server fails the calls with ErrDisconnected at their deadline; the
// pool dials again in the background and serves once the server is back.
func TestReconnect(t *testing.T) {
	d := startDaemon(t, map[string]any{}, "127.0.0.1:0")
	addr := d.addr
	c := dial(t, addr, Options{Conns: 2})
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	// With no server a call waits for a connection until its deadline,
	// then fails with ErrDisconnected.
	waitFor(t, func() bool {
		_, err := c.Raycast(ctxT(t, 300*time.Millisecond), &pb.Raycast{Scene: "town", From: Cell(1, 1), To: Cell(5, 5)})
		return errors.Is(err, ErrDisconnected)
	}, "calls fail with ErrDisconnected")
	startDaemon(t, map[string]any{}, addr)
	waitFor(t, func() bool {
		_, err := c.Raycast(ctx, &pb.Raycast{Scene: "town", From: Cell(1, 1), To: Cell(5, 5)})
		return err == nil
	}, "served again after the restart")
}

// Options.Token authenticates every connection of the pool; without one,
// Dial fails saying why.
func TestAuth(t *testing.T) {
	d := startDaemon(t, map[string]any{}, "127.0.0.1:0", map[string]any{"auth": map[string]any{
		"tokens": []any{map[string]any{"token": "go-query-token-0123456789", "role": "query"}}}})
	_, err := Dial(ctxT(t, 5*time.Second), d.addr, Options{Conns: 1})
	mustf(t, IsStatus(err, pb.Status_UNAUTHENTICATED), "no token: %v", err)
	c := dial(t, d.addr, Options{Conns: 3, Token: "go-query-token-0123456789"})
	ctx := ctxT(t, 5*time.Second)
	for i := 0; i < 6; i++ { // over all three connections
		if _, err := c.Raycast(ctx, &pb.Raycast{Scene: "town", From: Cell(1, 1), To: Cell(5, 5)}); err != nil {
			t.Fatalf("query role: %v", err)
		}
	}
	_, err = c.Stats(ctx)
	mustf(t, IsStatus(err, pb.Status_PERMISSION_DENIED), "Stats needs admin: %v", err)
}

// An idle pool pings often enough that the server's idle_timeout_ms
// never closes its connections.
func TestKeepalive(t *testing.T) {
	d := startDaemon(t, map[string]any{"idle_timeout_ms": 900}, "127.0.0.1:0")
	c := dial(t, d.addr, Options{Conns: 2})
	time.Sleep(2700 * time.Millisecond)
	_, err := c.Raycast(ctxT(t, 5*time.Second), &pb.Raycast{Scene: "town", From: Cell(1, 1), To: Cell(5, 5)})
	mustf(t, err == nil && c.redials.Load() == 0, "after 3 idle timeouts: %v, %d connections made again", err, c.redials.Load())
}

// The example program (README.md) runs against the daemon and finds the
// wall move.
func TestExampleProgram(t *testing.T) {
	goBin := os.Getenv("PATHD_GO")
	if goBin == "" {
		goBin = "go"
	}
	out, err := exec.Command(goBin, "run", "./cmd/example", env(t, "PATHD_ADDR")).CombinedOutput()
	mustf(t, err == nil && strings.Contains(string(out), "path: OK") &&
		strings.Contains(string(out), "move valid: false (MOVE_BLOCKED_SEGMENT)"), "example: %v\n%s", err, out)
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The committed pathdpb/pathd.pb.go is what protoc-gen-go makes of
// proto/pathd.proto now (the version comment aside).
func TestGeneratedMatchesProto(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("./gen.sh", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("gen.sh (needs protobuf-compiler and protoc-gen-go): %v\n%s", err, out)
	}
	fresh, err := os.ReadFile(filepath.Join(dir, "pathd.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join("pathdpb", "pathd.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	strip := func(b []byte) string {
		var keep []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(l, "// \tprotoc") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	mustf(t, strip(fresh) == strip(committed),
		"pathdpb/pathd.pb.go is stale: proto/pathd.proto changed; run client-examples/go/gen.sh and commit the result")
}

// A status newer than the client (99: not in pathdpb) surfaces as a
// StatusError carrying its number, for a path, a query, a batch item and
// an update (never retried: the client cannot know it is retryable), and
// the connection goes on.
func TestNewerStatus(t *testing.T) {
	const newer = pb.Status(99)
	addr := fakeServer(t, 64, func(req *pb.Request) []*pb.Response {
		switch {
		case req.GetPing() != nil:
			return []*pb.Response{pongTo(req)}
		case req.GetBatch() != nil:
			return []*pb.Response{{Id: req.Id, Final: true, Body: &pb.Response_Batch{Batch: &pb.BatchResult{
				Items: []*pb.QueryResult{{Status: newer, Message: "from the future"}}}}}}
		}
		return []*pb.Response{refusal(req, newer, 0)}
	})
	c := dial(t, addr, Options{Conns: 1})
	ctx := ctxT(t, 10*time.Second)
	named := func(what string, err error) {
		t.Helper()
		mustf(t, IsStatus(err, newer) && err.Error() == "pathd: 99: fake", "%s: %v", what, err)
	}
	_, err := c.FindPath(ctx, &pb.FindPath{Scene: "demo", Start: Cell(1, 1), Goal: Cell(2, 2)})
	named("a path", err)
	_, err = c.Raycast(ctx, &pb.Raycast{Scene: "demo", From: Cell(1, 1), To: Cell(2, 2)})
	named("a query", err)
	_, err = c.UpdateCells(ctx, oneCell("demo"))
	named("an update", err)
	items, err := c.Batch(ctx, []*pb.Query{Q(&pb.Raycast{Scene: "demo", From: Cell(1, 1), To: Cell(2, 2)})})
	mustf(t, err == nil && len(items) == 1 && items[0].Status == newer && items[0].Status.String() == "99",
		"a batch item keeps its status: %v %v", err, items)
	_, err = c.Ping(ctx)
	mustf(t, err == nil, "the connection goes on: %v", err)
	mustf(t, c.Retries() == 0 && c.Reconnects() == 0, "nothing retried: %d retries, %d reconnects",
		c.Retries(), c.Reconnects())
}

// A nil request message (FindPath(ctx, nil), a nil batch item) is an error
// naming it, never a panic in the caller's game server: FindPath(ctx, nil)
// used to dereference the path that a nil message's answer never carried,
// and Do(ctx, nil) read a nil request's body.
func TestNilRequestIsAnError(t *testing.T) {
	c := dial(t, env(t, "PATHD_ADDR"), Options{})
	ctx := ctxT(t, 10*time.Second)
	if _, err := c.FindPath(ctx, nil); err == nil || !strings.Contains(err.Error(), "FindPath is nil") {
		t.Errorf("FindPath(nil): %v", err)
	}
	if _, err := c.FindRoute(ctx, nil); err == nil || !strings.Contains(err.Error(), "FindRoute is nil") {
		t.Errorf("FindRoute(nil): %v", err)
	}
	if _, err := c.Raycast(ctx, nil); err == nil || !strings.Contains(err.Error(), "Raycast is nil") {
		t.Errorf("Raycast(nil): %v", err)
	}
	if _, err := c.Do(ctx, nil); err == nil || !strings.Contains(err.Error(), "request is nil") {
		t.Errorf("Do(nil): %v", err)
	}
	if _, err := c.Batch(ctx, []*pb.Query{nil}); err == nil || !strings.Contains(err.Error(), "item 0 is nil") {
		t.Errorf("Batch([nil]): %v", err)
	}
	// The client still serves.
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping after: %v", err)
	}
}
