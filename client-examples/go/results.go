// Answers that span several frames, assembled: a path from its PathChunk
// frames (seq 0, 1, ... until final), a route from its RouteLeg frames and
// the final RouteResult (docs/PROTOCOL.md, "Streaming"). Frames out of
// sequence, or counts that disagree, are protocol errors.

package pathd

import (
	pb "pathd.example/client/pathdpb"
)

// maxPathWaypoints bounds what a misbehaving server can make the client
// hold for one answer: more than any real grid path.
const maxPathWaypoints = 4 << 20

// Timing is the server's own time for an answer (Response.server_us and
// search_us, docs/PROTOCOL.md "Timing"), in microseconds.
type Timing struct {
	ServerUs uint64 // from the server's read of the request to its answer
	SearchUs uint64 // of that, the search proper (0 when nothing was searched)
}

// Waypoint is one cell of a path. WX, WY (world coordinates of the cell's
// centre) are set when the request asked want_world; T (arrival time, s)
// when it gave a speed.
type Waypoint struct {
	X, Y   int32
	WX, WY float64
	T      float64
}

// Path is an answered FindPath (or a Batch's FindPath item).
type Path struct {
	ID           uint64
	Status       pb.Status // OK or PARTIAL when returned without error
	Message      string
	Cost         float64
	Expansions   uint64
	SearchMicros uint64
	Version      uint64 // the scene version the search ran on
	Waypoints    []Waypoint
	HasWorld     bool      // Waypoints carry WX, WY
	HasTimes     bool      // Waypoints carry T
	StartUsed    *pb.Cell  // the start used, when snapped
	GoalUsed     *pb.Cell  // the end reached, when not the goal asked for
	Cutoff       pb.Status // BUDGET/DEADLINE_EXCEEDED behind a PARTIAL from partial_on_cutoff
	GoalIndex    int       // with FindPath.goals: the goal reached; else -1
	Timing       Timing
}

// Cells returns the waypoints as [x, y] pairs.
func (p *Path) Cells() [][2]int32 {
	out := make([][2]int32, len(p.Waypoints))
	for i, w := range p.Waypoints {
		out[i] = [2]int32{w.X, w.Y}
	}
	return out
}

// RouteLeg is one scene's part of a route.
type RouteLeg struct {
	Scene     string
	Cost      float64
	Version   uint64
	Waypoints []Waypoint
	Portal    *pb.PortalHop // where the leg ends; nil on the last leg
}

// Route is an answered FindRoute.
type Route struct {
	ID      uint64
	Status  pb.Status
	Message string
	Legs    []RouteLeg
	Result  *pb.RouteResult // totals: total_cost, expansions, micros, pinned, goal_used
	Timing  Timing
}

// unpack decodes one frame's packed waypoints: the cells by running sums
// over the deltas (the first is absolute), with world coordinates and
// times when the frame carries them.
func unpack(id uint64, m *pb.Waypoints, out []Waypoint) ([]Waypoint, error) {
	if m == nil {
		return out, nil
	}
	n := len(m.Dx)
	if len(m.Dy) != n || (len(m.T) != 0 && len(m.T) != n) ||
		(len(m.Wx) != 0 && len(m.Wx) != n) || len(m.Wy) != len(m.Wx) {
		return out, protocolError("request %d: a frame's waypoint arrays differ in length", id)
	}
	if len(out)+n > maxPathWaypoints {
		return out, protocolError("request %d: answer longer than %d waypoints", id, maxPathWaypoints)
	}
	var x, y int32
	for i := 0; i < n; i++ {
		x += m.Dx[i]
		y += m.Dy[i]
		w := Waypoint{X: x, Y: y}
		if len(m.Wx) == n {
			w.WX, w.WY = m.Wx[i], m.Wy[i]
		}
		if len(m.T) == n {
			w.T = m.T[i]
		}
		out = append(out, w)
	}
	return out, nil
}

// finishPath fills p from the path's final chunk (nil when the answer was a
// refusal with no path body).
func finishPath(p *Path, fp *pb.FindPath, chunk *pb.PathChunk) error {
	p.GoalIndex = -1
	p.HasWorld = fp.GetWantWorld()
	p.HasTimes = fp.GetSpeed() > 0
	if chunk == nil {
		return nil
	}
	if chunk.TotalWaypoints != 0 && int(chunk.TotalWaypoints) != len(p.Waypoints) {
		return protocolError("request %d: final chunk says %d waypoints, %d arrived",
			p.ID, chunk.TotalWaypoints, len(p.Waypoints))
	}
	p.Cost = chunk.Cost
	p.Expansions = chunk.Expansions
	p.SearchMicros = chunk.SearchMicros
	p.Version = chunk.SceneVersion
	p.StartUsed = chunk.StartUsed
	p.GoalUsed = chunk.GoalUsed
	p.Cutoff = chunk.Cutoff
	if len(fp.GetGoals()) > 0 && (p.Status == pb.Status_OK || p.Status == pb.Status_PARTIAL) {
		p.GoalIndex = int(chunk.GoalIndex)
	}
	return nil
}

// ItemPath decodes a Batch answer's FindPath item (q is the item as sent,
// for its want_world, speed and goals).
func ItemPath(q *pb.Query, item *pb.QueryResult) (*Path, error) {
	p := &Path{Status: item.Status, Message: item.Message}
	var chunk *pb.PathChunk
	if k, ok := item.Kind.(*pb.QueryResult_Path); ok {
		chunk = k.Path
		var err error
		if p.Waypoints, err = unpack(0, chunk.Points, nil); err != nil {
			return nil, err
		}
	}
	if item.Status == pb.Status_STALE_VERSION {
		p.Version = item.Version
	}
	if err := finishPath(p, q.GetFindPath(), chunk); err != nil {
		return nil, err
	}
	return p, nil
}

// assembler collects one request's frames until its final one.
type assembler interface {
	// feed takes a frame that is not final (a path chunk, a route leg).
	feed(r *pb.Response) error
}

// pathAsm assembles a FindPath answer.
type pathAsm struct {
	p       Path
	nextSeq uint32
}

func (a *pathAsm) feed(r *pb.Response) error {
	chunk := r.GetPath()
	if chunk == nil {
		if r.Final {
			return nil
		}
		return protocolError("request %d: a path frame without a PathChunk", r.Id)
	}
	if chunk.Seq != a.nextSeq {
		return protocolError("request %d: path chunk %d arrived, expected %d", r.Id, chunk.Seq, a.nextSeq)
	}
	a.nextSeq++
	var err error
	a.p.Waypoints, err = unpack(r.Id, chunk.Points, a.p.Waypoints)
	return err
}

func (a *pathAsm) finish(r *pb.Response, fp *pb.FindPath) (*Path, error) {
	if err := a.feed(r); err != nil {
		return nil, err
	}
	p := &a.p
	p.ID, p.Status, p.Message = r.Id, r.Status, r.Message
	if e, ok := r.Body.(*pb.Response_Error); ok && e.Error != nil {
		if p.Message == "" {
			p.Message = e.Error.Message
		}
		p.Version = e.Error.Version
	}
	p.Timing = Timing{r.ServerUs, r.SearchUs}
	if err := finishPath(p, fp, r.GetPath()); err != nil {
		return nil, err
	}
	return p, nil
}

// routeAsm assembles a FindRoute answer.
type routeAsm struct {
	legs    []RouteLeg
	open    bool // the last leg has not ended
	nextSeq uint32
}

func (a *routeAsm) feed(r *pb.Response) error {
	leg := r.GetRouteLeg()
	if leg == nil {
		if r.Final {
			return nil
		}
		return protocolError("request %d: a route frame without a RouteLeg", r.Id)
	}
	if a.open {
		if int(leg.Leg) != len(a.legs)-1 || leg.Seq != a.nextSeq {
			return protocolError("request %d: route leg %d frame %d arrived, expected leg %d frame %d",
				r.Id, leg.Leg, leg.Seq, len(a.legs)-1, a.nextSeq)
		}
	} else {
		if int(leg.Leg) != len(a.legs) || leg.Seq != 0 {
			return protocolError("request %d: route leg %d frame %d arrived, expected leg %d frame 0",
				r.Id, leg.Leg, leg.Seq, len(a.legs))
		}
		a.legs = append(a.legs, RouteLeg{Scene: leg.Scene})
		a.open, a.nextSeq = true, 0
	}
	a.nextSeq++
	cur := &a.legs[len(a.legs)-1]
	var err error
	if cur.Waypoints, err = unpack(r.Id, leg.Points, cur.Waypoints); err != nil {
		return err
	}
	cur.Version = leg.SceneVersion
	if leg.LegEnd {
		if leg.TotalWaypoints != 0 && int(leg.TotalWaypoints) != len(cur.Waypoints) {
			return protocolError("request %d: leg %d says %d waypoints, %d arrived",
				r.Id, leg.Leg, leg.TotalWaypoints, len(cur.Waypoints))
		}
		cur.Cost, cur.Portal, a.open = leg.Cost, leg.Portal, false
	}
	return nil
}

func (a *routeAsm) finish(r *pb.Response) (*Route, error) {
	rr := r.GetRouteResult()
	if rr == nil {
		if len(a.legs) > 0 {
			return nil, protocolError("request %d: route ended without a RouteResult", r.Id)
		}
		rr = &pb.RouteResult{}
	}
	if int(rr.Legs) != len(a.legs) || a.open {
		return nil, protocolError("request %d: RouteResult counts %d legs, %d arrived", r.Id, rr.Legs, len(a.legs))
	}
	rt := &Route{ID: r.Id, Status: r.Status, Message: r.Message, Legs: a.legs, Result: rr,
		Timing: Timing{r.ServerUs, r.SearchUs}}
	if e := r.GetError(); e != nil && rt.Message == "" {
		rt.Message = e.Message
	}
	return rt, nil
}
