// A small program using the pathd Go client: a path across the demo town,
// a batch of queries, and a claimed move checked by the server.
//
//	cd client-examples/go && go run ./cmd/example [HOST:PORT]
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	pathd "pathd.example/client"
	pb "pathd.example/client/pathdpb"
)

func main() {
	addr := "127.0.0.1:7420"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	if err := run(addr); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Two connections; each keeps within the server's in-flight cap.
	client, err := pathd.Dial(ctx, addr, pathd.Options{Conns: 2, Token: os.Getenv("PATHD_TOKEN")})
	if err != nil {
		return err
	}
	defer client.Close()

	path, err := client.FindPath(ctx, &pb.FindPath{Scene: "town", Start: pathd.Cell(3, 4), Goal: pathd.Cell(30, 20),
		Style: pb.WaypointStyle_STYLE_CORNERS})
	if err != nil {
		return err
	}
	fmt.Printf("path: %s, cost %.2f, %d corners: %v\n", path.Status, path.Cost, len(path.Waypoints), path.Cells())

	answers, err := client.Batch(ctx, []*pb.Query{
		pathd.Q(&pb.IsReachable{Scene: "town", From: pathd.Cell(3, 4), To: pathd.Cell(30, 20)}),
		pathd.Q(&pb.DistanceToWall{Scene: "town", At: pathd.Cell(3, 4)}),
	})
	if err != nil {
		return err
	}
	fmt.Printf("reachable: %v, distance to the nearest wall: %.2f cells\n",
		answers[0].GetReachable().GetReachable(), answers[1].GetDistanceToWall().GetDistance())

	// A player claims to walk from (1,1) to (3,3) in a second, through the
	// wall at (2,2): refused, and the server says where to put them back.
	move, err := client.ValidateMove(ctx, &pb.ValidateMove{Scene: "town", MaxSpeed: 4, Moves: []*pb.TimedPoint{
		{Point: pathd.Cell(1, 1), T: 0}, {Point: pathd.Cell(3, 3), T: 1}}})
	if err != nil {
		return err
	}
	fmt.Printf("move valid: %v (%s), put back at (%d,%d)\n", move.Valid, move.Reason,
		move.LastValid.GetX(), move.LastValid.GetY())
	return nil
}
