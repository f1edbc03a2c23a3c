//go:build unix

package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisOutageKeepsAcknowledgedWrites stops, kills and restarts a server
// and checks that what it acknowledged is still there, on the same address.
func TestRedisOutageKeepsAcknowledgedWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer c.Close()

	if err := c.Set(ctx, "k", "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ConfigGet(ctx, "appendfsync").Result()
	if err != nil || cfg["appendfsync"] != "always" {
		t.Fatalf("appendfsync = %v (%v), want always", cfg, err)
	}

	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if r.Running() {
		t.Fatal("Running after Stop")
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded while the server is stopped")
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v1" {
		t.Fatalf("after Stop+Start: GET k = %q, %v; want v1", got, err)
	}

	if err := c.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v2" {
		t.Fatalf("after Kill+Start: GET k = %q, %v; want v2 (appendfsync always)", got, err)
	}
}
