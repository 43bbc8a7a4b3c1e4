// Command net runs a TCP echo server on 127.0.0.1 and four clients that
// send small messages and wait for the echo: its trace blocks on the network.
package main

import (
	"io"
	"net"
	"sync"
	"time"

	"pyproflab.test/goprogs/traces/rec"
)

func serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}

func client(addr string, deadline time.Time, wg *sync.WaitGroup) {
	defer wg.Done()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	msg := make([]byte, 512)
	buf := make([]byte, 512)
	for time.Now().Before(deadline) {
		if _, err := c.Write(msg); err != nil {
			panic(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			panic(err)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go serve(ln)
	rec.Run(func(deadline time.Time) {
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go client(ln.Addr().String(), deadline, &wg)
		}
		wg.Wait()
	})
	ln.Close()
}
