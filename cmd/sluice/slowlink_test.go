package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// stopBound is what the tests allow `sluice run` to stop in after SIGTERM
// over a slow or stalled link (shutdownBound is the process's own limit).
const stopBound = 10 * time.Second

// TestRunStalledLinkSIGTERM: `sluice run` reads a source through a link
// that stops passing data, while it connects (first attempt) or while it
// streams with transactions in flight; SIGTERM ends it within stopBound,
// with status 0 and a log line after the signal naming what it waits for.
// A restart over a good link delivers every transaction exactly once.
// make slowlinks adds TestRunSlowLinks (1, 4 and 10 s one way).
func TestRunStalledLinkSIGTERM(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		ctx := context.Background()
		e := newRunEnv(t, f)
		link := testenv.NewFaultProxy(t, e.db.Addr())
		e.url = link.URL(e.db.URL(), e.db.Addr())
		e.writeConfig(t, "")
		if err := link.Stall(); err != nil {
			t.Fatal(err)
		}
		log := &syncBuffer{}
		cmd := e.start(t, log)
		time.Sleep(2 * time.Second) // connecting: the handshake hangs
		sigterm(t, cmd, log, "connecting")

		link2 := testenv.NewFaultProxy(t, e.db.Addr())
		e.url = link2.URL(e.db.URL(), e.db.Addr())
		e.writeConfig(t, "")
		if err := e.w.Txns(ctx, 20); err != nil {
			t.Fatal(err)
		}
		cmd = e.start(t, log)
		e.waitAll(t, 20, log)
		if err := link2.Stall(); err != nil {
			t.Fatal(err)
		}
		if err := e.w.Txns(ctx, 10); err != nil { // not seen: the link is stalled
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		sigterm(t, cmd, log, "streaming")

		e.url = ""
		e.writeConfig(t, "")
		cmd = e.start(t, log)
		e.waitAll(t, 30, log)
		sigterm(t, cmd, log, "after")
		e.checkAll(t, 30)
	})
}

// TestRunSlowLinks: `sluice run` streams a source whose link delays the
// server's bytes by 1, 4 and 10 s; SIGTERM while transactions are in
// flight ends it within stopBound with status 0; a restart delivers every
// transaction exactly once. With SLUICE_SLOWLINKS=1 (make slowlinks).
func TestRunSlowLinks(t *testing.T) {
	if os.Getenv("SLUICE_SLOWLINKS") == "" {
		t.Skip("slow (minutes): SLUICE_SLOWLINKS=1, or make slowlinks")
	}
	testenv.ForEachFlavor(t, func(t *testing.T, f position.Flavor) {
		for _, d := range []time.Duration{time.Second, 4 * time.Second, 10 * time.Second} {
			t.Run(d.String(), func(t *testing.T) {
				ctx := context.Background()
				// connect_timeout past the delay (see binlog's slowLink).
				e := newRunEnvOn(t, testenv.Options{Flavor: f, Extra: []string{"--connect-timeout=60"}})
				link := testenv.NewFaultProxy(t, e.db.Addr())
				e.url = link.URL(e.db.URL(), e.db.Addr())
				e.writeConfig(t, "")
				if err := e.w.Txns(ctx, 20); err != nil {
					t.Fatal(err)
				}
				log := &syncBuffer{}
				cmd := e.start(t, log)
				e.waitAll(t, 20, log)
				// The link slows down under the running pipeline (open
				// connections too): the stream goes on over it.
				if err := link.SetLatency(d); err != nil {
					t.Fatal(err)
				}
				wrote := time.Now()
				if err := e.w.Txns(ctx, 10); err != nil {
					t.Fatal(err)
				}
				// A delay past the silence bound the reader had (3
				// heartbeats + 5 s + 2 round trips measured on loopback:
				// 8 s) ends the stream; the reconnection measures the new
				// round trip and checks the server over the slow link
				// first (about 40 round trips in all).
				e.waitAllWithin(t, 30, log, 2*time.Minute+40*d)
				t.Logf("%s one way: 10 transactions delivered %s after they were written", d, time.Since(wrote).Round(time.Millisecond))
				time.Sleep(2 * d) // idle: heartbeats only
				if err := e.w.Txns(ctx, 10); err != nil {
					t.Fatal(err)
				}
				time.Sleep(d / 2) // in flight
				sigterm(t, cmd, log, d.String())
				e.url = ""
				e.writeConfig(t, "")
				cmd = e.start(t, log)
				e.waitAll(t, 40, log)
				sigterm(t, cmd, log, "after")
				e.checkAll(t, 40)
				// Past the silence bound the reader had (8 s) the stream
				// is reconnected once, on purpose.
				if n := strings.Count(log.String(), "binlog connection lost"); n > 0 && d < 8*time.Second {
					t.Errorf("%d reconnections over a slow but working link", n)
				}
			})
		}
	})
}

// sigterm stops cmd with SIGTERM and checks that it exits with status 0
// within stopBound, having logged what it waits for.
func sigterm(t *testing.T, cmd *exec.Cmd, log *syncBuffer, when string) {
	t.Helper()
	before := len(log.String())
	began := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(began)
		after := log.String()[before:]
		if err != nil {
			t.Fatalf("%s: sluice run after SIGTERM: %v\n%s", when, err, after)
		}
		if !strings.Contains(after, "signal received: stopping") || !strings.Contains(after, "source.") {
			t.Errorf("%s: nothing logged after the signal about what sluice waits for:\n%s", when, after)
		}
		t.Logf("%s: stopped %s after SIGTERM", when, took.Round(time.Millisecond))
	case <-time.After(stopBound):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s: sluice run still running %s after SIGTERM:\n%s", when, stopBound, log.String()[before:])
	}
}
