// pyropush runs a small workload under pyroscope-go, pushing to the server
// given (pyproflab serve), and records every push (capture).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/grafana/pyroscope-go"

	"pyproflab.test/pushers/internal/capture"
	"pyproflab.test/pushers/internal/work"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:4040", "server URL (pyproflab serve)")
	duration := flag.Duration("duration", 2*time.Minute, "how long to run")
	rate := flag.Duration("rate", 10*time.Second, "upload rate")
	dir := flag.String("capture", "", "folder to record the pushes in")
	token := flag.String("token", "", "bearer token")
	app := flag.String("app", "pyropush", "application name")
	version := flag.String("version", "v2.0.0", "version tag")
	instance := flag.String("instance", "pyro-1", "instance tag")
	flag.Parse()

	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(100000)
	p, err := pyroscope.Start(pyroscope.Config{
		ApplicationName: *app,
		ServerAddress:   *server,
		UploadRate:      *rate,
		Tags:            map[string]string{"version": *version, "instance": *instance, "team": "lab"},
		HTTPClient:      capture.Client(*dir, *token),
		ProfileTypes: []pyroscope.ProfileType{
			pyroscope.ProfileCPU, pyroscope.ProfileAllocObjects, pyroscope.ProfileAllocSpace,
			pyroscope.ProfileInuseObjects, pyroscope.ProfileInuseSpace,
			pyroscope.ProfileMutexCount, pyroscope.ProfileMutexDuration,
			pyroscope.ProfileBlockCount, pyroscope.ProfileBlockDuration,
			pyroscope.ProfileGoroutines,
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pyropush:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	work.Run(ctx)
	p.Flush(true)
	_ = p.Stop()
}
