// The calls: one method per request kind of proto/pathd.proto. Requests are
// the generated messages themselves (pathdpb), so every field the protocol
// has is reachable; answers are the generated result messages, or Path and
// Route for the kinds that stream. A call returns an error for any status
// but OK (PARTIAL too for paths and routes): a *StatusError.

package pathd

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"time"

	"google.golang.org/protobuf/proto"
	pb "pathd.example/client/pathdpb"
)

// Cell is a point given as a cell (x column, y row).
func Cell(x, y int32) *pb.Point {
	return &pb.Point{Kind: &pb.Point_Cell{Cell: &pb.Cell{X: x, Y: y}}}
}

// World is a point given in world coordinates.
func World(x, y float64) *pb.Point {
	return &pb.Point{Kind: &pb.Point_World{World: &pb.WorldPoint{X: x, Y: y}}}
}

// Q wraps one query as a Batch item: m is a *pb.FindPath, *pb.Raycast,
// *pb.ValidateMove, *pb.MoveAlong, *pb.NearestWalkable, *pb.IsReachable,
// *pb.RandomPoint or *pb.DistanceToWall. Any other type panics.
func Q(m proto.Message) *pb.Query {
	q := &pb.Query{}
	switch v := m.(type) {
	case *pb.FindPath:
		q.Kind = &pb.Query_FindPath{FindPath: v}
	case *pb.Raycast:
		q.Kind = &pb.Query_Raycast{Raycast: v}
	case *pb.ValidateMove:
		q.Kind = &pb.Query_ValidateMove{ValidateMove: v}
	case *pb.MoveAlong:
		q.Kind = &pb.Query_MoveAlong{MoveAlong: v}
	case *pb.NearestWalkable:
		q.Kind = &pb.Query_Nearest{Nearest: v}
	case *pb.IsReachable:
		q.Kind = &pb.Query_Reachable{Reachable: v}
	case *pb.RandomPoint:
		q.Kind = &pb.Query_RandomPoint{RandomPoint: v}
	case *pb.DistanceToWall:
		q.Kind = &pb.Query_DistanceToWall{DistanceToWall: v}
	default:
		panic(fmt.Sprintf("pathd.Q: %T is not a batch query", m))
	}
	return q
}

// Answer is the raw answer Do returns: the final frame, and the assembled
// path or route for those kinds.
type Answer struct {
	Response *pb.Response // the final frame (Status, body, timing)
	Path     *Path        // FindPath
	Route    *Route       // FindRoute
	Timing   Timing
}

// Do sends any request (its Id is set here) and returns the answer of any
// status: the raw form for what the typed calls do not cover. OVERLOADED is
// still retried until the deadline. Watch has its own call.
func (c *Client) Do(ctx context.Context, req *pb.Request) (*Answer, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	if _, ok := req.Body.(*pb.Request_Watch); ok {
		return nil, fmt.Errorf("pathd: Do cannot carry a Watch: use Client.Watch")
	}
	fp := req.GetFindPath()
	var newAsm func() assembler
	switch {
	case fp != nil:
		newAsm = func() assembler { return &pathAsm{} }
	case req.GetFindRoute() != nil:
		newAsm = func() assembler { return &routeAsm{} }
	}
	r, asm, err := c.exchange(ctx, req, newAsm)
	if err != nil {
		return nil, err
	}
	a := &Answer{Response: r, Timing: Timing{r.ServerUs, r.SearchUs}}
	switch asm := asm.(type) {
	case *pathAsm:
		if a.Path, err = asm.finish(r, fp); err != nil {
			return nil, err
		}
	case *routeAsm:
		if a.Route, err = asm.finish(r); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// FindPath asks for a path; OK and PARTIAL return it, any other status is a
// *StatusError whose Result is the *Path.
func (c *Client) FindPath(ctx context.Context, fp *pb.FindPath) (*Path, error) {
	a, err := c.Do(ctx, &pb.Request{Body: &pb.Request_FindPath{FindPath: fp}})
	if err != nil {
		return nil, err
	}
	if p := a.Path; p.Status != pb.Status_OK && p.Status != pb.Status_PARTIAL {
		e := statusError(a.Response)
		e.Result = p
		return nil, e
	}
	return a.Path, nil
}

// FindRoute asks for a route across scenes through portals; OK and PARTIAL
// return it.
func (c *Client) FindRoute(ctx context.Context, fr *pb.FindRoute) (*Route, error) {
	a, err := c.Do(ctx, &pb.Request{Body: &pb.Request_FindRoute{FindRoute: fr}})
	if err != nil {
		return nil, err
	}
	if rt := a.Route; rt.Status != pb.Status_OK && rt.Status != pb.Status_PARTIAL {
		e := statusError(a.Response)
		e.Result = rt
		return nil, e
	}
	return a.Route, nil
}

// checkRequest refuses a request built around a nil message (FindPath(ctx,
// nil), Raycast(ctx, nil)): proto would send it as an empty message, and
// FindPath went on to read the path its answer never carried, a nil
// dereference in the caller's process.
func checkRequest(req *pb.Request) error {
	if req == nil {
		return errors.New("pathd: the request is nil")
	}
	if req.Body == nil {
		return errors.New("pathd: request has no body")
	}
	// Every body is a oneof wrapper struct holding one message pointer.
	if v := reflect.ValueOf(req.Body).Elem().Field(0); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Errorf("pathd: the request's %s is nil", v.Type().Elem().Name())
	}
	return nil
}

// single sends req and returns the body get picks from an OK answer.
func single[T proto.Message](ctx context.Context, c *Client, req *pb.Request, get func(*pb.Response) T) (T, error) {
	var zero T
	if err := checkRequest(req); err != nil {
		return zero, err
	}
	r, _, err := c.exchange(ctx, req, nil)
	if err != nil {
		return zero, err
	}
	if r.Status != pb.Status_OK {
		return zero, statusError(r)
	}
	v := get(r)
	if !v.ProtoReflect().IsValid() {
		return zero, protocolError("request %d: the answer has the wrong body", r.Id)
	}
	return v, nil
}

// ---- movement queries (docs/PROTOCOL.md, "Authoritative movement") ----

func (c *Client) Raycast(ctx context.Context, m *pb.Raycast) (*pb.RaycastResult, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_Raycast{Raycast: m}}, (*pb.Response).GetRaycast)
}

// ValidateMove checks a claimed movement; an illegal one is answered OK
// with Valid false, FirstInvalid and Reason.
func (c *Client) ValidateMove(ctx context.Context, m *pb.ValidateMove) (*pb.ValidateMoveResult, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_ValidateMove{ValidateMove: m}}, (*pb.Response).GetValidateMove)
}

func (c *Client) MoveAlong(ctx context.Context, m *pb.MoveAlong) (*pb.MoveAlongResult, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_MoveAlong{MoveAlong: m}}, (*pb.Response).GetMoveAlong)
}

func (c *Client) NearestWalkable(ctx context.Context, m *pb.NearestWalkable) (*pb.NearestResult, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_Nearest{Nearest: m}}, (*pb.Response).GetNearest)
}

func (c *Client) IsReachable(ctx context.Context, m *pb.IsReachable) (*pb.ReachableResult, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_Reachable{Reachable: m}}, (*pb.Response).GetReachable)
}

func (c *Client) RandomPoint(ctx context.Context, m *pb.RandomPoint) (*pb.RandomPointResult, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_RandomPoint{RandomPoint: m}}, (*pb.Response).GetRandomPoint)
}

func (c *Client) DistanceToWall(ctx context.Context, m *pb.DistanceToWall) (*pb.DistanceToWallResult, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_DistanceToWall{DistanceToWall: m}}, (*pb.Response).GetDistanceToWall)
}

// Batch sends up to max_batch_items queries (made with Q) in one frame and
// returns their answers in order, each with its own status (a FindPath
// item's path: ItemPath). The batch takes one in-flight slot per item. Items
// the server answered OVERLOADED (its job queue was full) are sent again,
// alone, with backoff until the deadline; past it they keep that status.
func (c *Client) Batch(ctx context.Context, items []*pb.Query) ([]*pb.QueryResult, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("pathd: a batch needs at least one item")
	}
	for i, q := range items {
		if q == nil || q.Kind == nil || reflect.ValueOf(q.Kind).Elem().Field(0).IsNil() {
			return nil, fmt.Errorf("pathd: batch item %d is nil", i)
		}
	}
	results := make([]*pb.QueryResult, len(items))
	todo := make([]int, len(items))
	for i := range todo {
		todo[i] = i
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.opts.RetryTimeout)
	}
	backoff := c.opts.RetryBackoff
	for {
		b := &pb.Batch{Items: make([]*pb.Query, len(todo))}
		for j, i := range todo {
			b.Items[j] = items[i]
		}
		r, _, err := c.exchange(ctx, &pb.Request{Body: &pb.Request_Batch{Batch: b}}, nil)
		if err != nil {
			return nil, err
		}
		if r.Status != pb.Status_OK {
			return nil, statusError(r)
		}
		got := r.GetBatch()
		if got == nil || len(got.Items) != len(todo) {
			return nil, protocolError("request %d: a batch of %d items answered with %d", r.Id, len(todo), len(got.GetItems()))
		}
		var again []int
		for j, i := range todo {
			results[i] = got.Items[j]
			if got.Items[j].Status == pb.Status_OVERLOADED {
				c.overloaded.Add(1)
				again = append(again, i)
			}
		}
		if len(again) == 0 || c.backoff(ctx, deadline, &backoff) != nil {
			return results, nil
		}
		c.retries.Add(1)
		todo = again
	}
}

// ---- scenes ----

// UpdateCells changes cells as one new scene version (role write).
func (c *Client) UpdateCells(ctx context.Context, m *pb.UpdateCells) (*pb.UpdateResult, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_UpdateCells{UpdateCells: m}}, (*pb.Response).GetUpdate)
}

// CreateScene makes a scene from a map's bytes or raw cells (role write).
func (c *Client) CreateScene(ctx context.Context, m *pb.CreateScene) (*pb.SceneChange, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_CreateScene{CreateScene: m}}, (*pb.Response).GetSceneChange)
}

// CreateInstance makes a scene sharing a template's memory (role write).
func (c *Client) CreateInstance(ctx context.Context, m *pb.CreateInstance) (*pb.SceneChange, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_CreateInstance{CreateInstance: m}}, (*pb.Response).GetSceneChange)
}

// DropScene stops serving a scene (role write).
func (c *Client) DropScene(ctx context.Context, m *pb.DropScene) (*pb.SceneChange, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_DropScene{DropScene: m}}, (*pb.Response).GetSceneChange)
}

// ---- reservations (docs/PROTOCOL.md, "Reservations") ----

// ReservePath plans the agent around the other agents' reservations (SIPP)
// and reserves the plan, replacing the agent's reservations from T0Ms on
// (role write). OK and PARTIAL (the window ended first: reserve again
// before ReservedUntilMs) return the result; any other status is a
// *StatusError whose Result is the *pb.ReservePathResult when one came
// (START_BLOCKED by another agent: BlockingAgent; NO_PATH). Nothing is
// reserved then.
func (c *Client) ReservePath(ctx context.Context, m *pb.ReservePath) (*pb.ReservePathResult, error) {
	a, err := c.Do(ctx, &pb.Request{Body: &pb.Request_ReservePath{ReservePath: m}})
	if err != nil {
		return nil, err
	}
	r := a.Response
	res := r.GetReservePath()
	if r.Status != pb.Status_OK && r.Status != pb.Status_PARTIAL {
		e := statusError(r)
		if res != nil {
			e.Result = res
		}
		return nil, e
	}
	if res == nil {
		return nil, protocolError("request %d: the answer has the wrong body", r.Id)
	}
	return res, nil
}

// ReleaseAgent removes every reservation of the agent (role write);
// Released says whether it was in the table.
func (c *Client) ReleaseAgent(ctx context.Context, m *pb.ReleaseAgent) (*pb.ReleaseResult, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_ReleaseAgent{ReleaseAgent: m}}, (*pb.Response).GetRelease)
}

// ReleaseAll releases every agent of the scene and forgets its game clock
// (role write): a game whose clock starts over calls it first, or its
// t0_ms from 0 are refused. AgentsReleased says how many went; watchers
// hear AGENTS_RELEASED.
func (c *Client) ReleaseAll(ctx context.Context, scene string) (*pb.ReleaseResult, error) {
	return c.ReleaseAgent(ctx, &pb.ReleaseAgent{Scene: scene, All: true})
}

// GetReservations lists the reservations holding cells of a rectangle over a
// time range, with the table's size: for debugging, drawing and tests.
func (c *Client) GetReservations(ctx context.Context, m *pb.GetReservations) (*pb.ReservationList, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_Reservations{Reservations: m}},
		(*pb.Response).GetReservations)
}

// Scenes lists the served scenes.
func (c *Client) Scenes(ctx context.Context) ([]*pb.SceneSummary, error) {
	l, err := single(ctx, c, &pb.Request{Body: &pb.Request_ListScenes{ListScenes: &pb.ListScenes{}}}, (*pb.Response).GetSceneList)
	if err != nil {
		return nil, err
	}
	return l.Scenes, nil
}

func (c *Client) SceneInfo(ctx context.Context, m *pb.GetSceneInfo) (*pb.SceneInfo, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_SceneInfo{SceneInfo: m}}, (*pb.Response).GetSceneInfo)
}

// SceneGridBand reads one band of a grid's rows.
func (c *Client) SceneGridBand(ctx context.Context, m *pb.GetSceneGrid) (*pb.SceneGrid, error) {
	g, err := single(ctx, c, &pb.Request{Body: &pb.Request_SceneGrid{SceneGrid: m}}, (*pb.Response).GetSceneGrid)
	if err == nil && (g.RowCount < 1 || len(g.Cells) != int(g.RowCount)*int(g.Width)) {
		return nil, protocolError("a grid band of %d rows x %d holds %d bytes", g.RowCount, g.Width, len(g.Cells))
	}
	return g, err
}

// Grid is a whole grid: Cells row-major, 0 blocked, else the cell's cost.
type Grid struct {
	Width, Height int
	Version       uint64
	Cells         []byte
}

// sceneGridRestarts: how often SceneGrid starts over when the scene changes
// between bands.
const sceneGridRestarts = 8

// SceneGrid reads a whole grid band by band, starting over when the scene's
// version changes between bands (docs/PROTOCOL.md, GetSceneGrid).
func (c *Client) SceneGrid(ctx context.Context, scene string, unitSize uint32) (*Grid, error) {
	for restart := 0; restart <= sceneGridRestarts; restart++ {
		var g *Grid
		row := int32(0)
		for g == nil || row < int32(g.Height) {
			band, err := c.SceneGridBand(ctx, &pb.GetSceneGrid{Scene: scene, UnitSize: unitSize, RowStart: row})
			if IsStatus(err, pb.Status_OUT_OF_BOUNDS) && g != nil {
				break // the grid shrank: start over
			}
			if err != nil {
				return nil, err
			}
			if g == nil {
				g = &Grid{Width: int(band.Width), Height: int(band.Height), Version: band.Version}
			} else if band.Version != g.Version {
				break
			}
			g.Cells = append(g.Cells, band.Cells...)
			row += band.RowCount
		}
		if g != nil && row >= int32(g.Height) && len(g.Cells) == g.Width*g.Height {
			return g, nil
		}
	}
	return nil, fmt.Errorf("pathd: scene %q kept changing while its grid was read", scene)
}

// ---- the server ----

// Ping measures a round trip.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	nonce := binary.LittleEndian.Uint64(b[:])
	start := time.Now()
	p, err := single(ctx, c, &pb.Request{Body: &pb.Request_Ping{Ping: &pb.Ping{Nonce: nonce}}}, (*pb.Response).GetPong)
	if err != nil {
		return 0, err
	}
	if p.Nonce != nonce {
		return 0, protocolError("pong carries the wrong nonce")
	}
	return time.Since(start), nil
}

// GetLimits asks the server for its limits now (Limits gives those read
// when the connection was made).
func (c *Client) GetLimits(ctx context.Context) (*pb.Limits, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_Limits{Limits: &pb.GetLimits{}}}, (*pb.Response).GetLimits)
}

// Stats returns the server's counters (role admin).
func (c *Client) Stats(ctx context.Context) (*pb.Stats, error) {
	return single(ctx, c, &pb.Request{Body: &pb.Request_Stats{Stats: &pb.GetStats{}}}, (*pb.Response).GetStats)
}

// Reload has the server reread its config and maps, as SIGHUP (role admin).
func (c *Client) Reload(ctx context.Context) error {
	r, _, err := c.exchange(ctx, &pb.Request{Body: &pb.Request_Reload{Reload: &pb.Reload{}}}, nil)
	if err == nil && r.Status != pb.Status_OK {
		err = statusError(r)
	}
	return err
}
