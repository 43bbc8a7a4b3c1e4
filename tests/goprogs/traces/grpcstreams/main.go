// Command grpcstreams is the founding story's "too many gRPC streams" (seeds
// 001: found in the trace's synchronization blocking profile): a gRPC server
// and client (google.golang.org/grpc) on 127.0.0.1 over one connection, where
// 64 client goroutines open a new stream for every request (5 each) while the
// server allows 4 streams at a time (MaxConcurrentStreams) and the windows
// are grpc's smallest (64 KiB, static). Each stream sends a 16-byte request
// and receives 128 KiB in 16 KiB messages. The streams wait for the
// connection's stream quota in (*http2Client).NewStream, and for the window
// and write quota while they send; all of it is channel waiting, the sync
// profile.
//
// No protoc: the service is a hand-written grpc.ServiceDesc over a codec of
// raw bytes. The requests are counted so that the trace stays small (about
// 100 ms of workload, under 1 MB); -d (200 ms) bounds them in time as well.
// The connection is made before the trace starts; at the end the client and
// the server stop.
package main

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"pyproflab.test/goprogs/traces/rec"
)

const (
	clients    = 64
	maxStreams = 4
	window     = 64 << 10
	chunk      = 16 << 10
	chunks     = 8
	requests   = 5 // per client, unless -d ends first
	method     = "/pyproflab.Blob/Fetch"
)

// rawCodec passes messages as they are: every message is a *[]byte.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "raw" }

// fetch answers one request with chunks messages of chunk bytes.
func fetch(_ any, stream grpc.ServerStream) error {
	var req []byte
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	msg := make([]byte, chunk)
	for i := 0; i < chunks; i++ {
		if err := stream.SendMsg(&msg); err != nil {
			return err
		}
	}
	return nil
}

type blob interface{}

var service = grpc.ServiceDesc{
	ServiceName: "pyproflab.Blob",
	HandlerType: (*blob)(nil),
	Streams:     []grpc.StreamDesc{{StreamName: "Fetch", Handler: fetch, ServerStreams: true, ClientStreams: true}},
}

// request opens a stream, sends one request and reads the answer to its end.
func request(ctx context.Context, cc *grpc.ClientConn) error {
	s, err := cc.NewStream(ctx, &service.Streams[0], method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	req := make([]byte, 16)
	if err := s.SendMsg(&req); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	var msg []byte
	for {
		if err := s.RecvMsg(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func client(cc *grpc.ClientConn, deadline time.Time, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; i < requests && time.Now().Before(deadline); i++ {
		if err := request(context.Background(), cc); err != nil {
			panic(err)
		}
	}
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(
		grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.StaticStreamWindowSize(window),
		grpc.StaticConnWindowSize(window),
	)
	srv.RegisterService(&service, nil)
	go srv.Serve(ln)
	cc, err := grpc.NewClient(ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStaticStreamWindowSize(window),
		grpc.WithStaticConnWindowSize(window),
	)
	if err != nil {
		panic(err)
	}
	// connect before tracing: the trace holds the streams, not the handshake
	if err := request(context.Background(), cc); err != nil {
		panic(err)
	}
	rec.Run(func(deadline time.Time) {
		var wg sync.WaitGroup
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go client(cc, deadline, &wg)
		}
		wg.Wait()
	})
	cc.Close()
	srv.Stop()
}
