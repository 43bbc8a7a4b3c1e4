// ddpush runs a small workload under dd-trace-go's profiler, uploading to the
// agent address given (pyproflab serve), and records every upload (capture).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/DataDog/dd-trace-go/v2/profiler"

	"pyproflab.test/pushers/internal/capture"
	"pyproflab.test/pushers/internal/work"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8126", "agent host:port (pyproflab serve)")
	duration := flag.Duration("duration", 2*time.Minute, "how long to run")
	period := flag.Duration("period", 10*time.Second, "profiling period")
	dir := flag.String("capture", "", "folder to record the uploads in")
	token := flag.String("token", "", "bearer token")
	service := flag.String("service", "ddpush", "service tag")
	version := flag.String("version", "v1.2.3", "version tag")
	instance := flag.String("instance", "dd-1", "instance tag (as the host)")
	flag.Parse()

	err := profiler.Start(
		profiler.WithAgentAddr(*addr),
		profiler.WithService(*service),
		profiler.WithEnv("test"),
		profiler.WithVersion(*version),
		profiler.WithHostname(*instance),
		profiler.WithTags("team:lab", "pushed-by:ddpush"),
		profiler.WithPeriod(*period),
		profiler.CPUDuration(*period/2),
		profiler.WithProfileTypes(
			profiler.CPUProfile, profiler.HeapProfile, profiler.MutexProfile,
			profiler.BlockProfile, profiler.GoroutineProfile,
		),
		profiler.WithHTTPClient(capture.Client(*dir, *token)),
		profiler.WithLogStartup(false),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ddpush:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	work.Run(ctx)
	// Let the last period's upload finish before stopping (Stop cancels uploads).
	time.Sleep(*period / 2)
	profiler.Stop()
}
