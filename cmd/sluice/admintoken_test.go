package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// TestRunAdminToken: on a non-loopback admin address, sluice run refuses
// to start without admin.token; with one, a command without the token or
// with a wrong one gets 401 and starts nothing, reads stay open, and
// sluice snapshot with the token (from the environment or --token)
// works. The token shows in no log or output.
func TestRunAdminToken(t *testing.T) {
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		e := newRunEnv(t, flavor)
		ctx := context.Background()
		if err := e.w.Txns(ctx, 20); err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(freePort(t))
		admin := "127.0.0.1:" + port

		// No token: refused at start, naming the key.
		e.writeConfig(t, "admin: {addr: '0.0.0.0:"+port+"'}")
		out, err := exec.Command(e.bin, "run", "--config", e.config).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "admin.token: is required when admin.addr (0.0.0.0:"+port+") is not a loopback address") {
			t.Fatalf("run without admin.token: %v\n%s", err, out)
		}

		const token = "tok-3f9a1c7e5b2d4088a6e1"
		t.Setenv(adminTokenEnv, token)
		e.writeConfig(t, "admin: {addr: '0.0.0.0:"+port+"', token: '${"+adminTokenEnv+"}'}")
		cfg, _ := os.ReadFile(e.config)
		cfg = bytes.Replace(cfg, []byte("snapshot: {chunk_rows: 100}"), []byte("snapshot: {mode: never, chunk_rows: 10}"), 1)
		if err := os.WriteFile(e.config, cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		log := &syncBuffer{}
		cmd := e.start(t, log)
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(httpGet(t, "http://"+admin+"/healthz"), "ok") { // reads need no token
			if time.Now().After(deadline) {
				t.Fatalf("not healthy after 30 s\n%s", log.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if m := httpGet(t, "http://"+admin+"/metrics"); !strings.Contains(m, "sluice_messages_total") {
			t.Errorf("/metrics without a token: %s", m)
		}
		if s := httpGet(t, "http://"+admin+"/status"); !strings.Contains(s, `"running": true`) {
			t.Errorf("/status without a token: %s", s)
		}
		// Missing and wrong tokens: 401, nothing started.
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", token, "Basic " + token} {
			req, _ := http.NewRequest(http.MethodPost, "http://"+admin+"/snapshot?table=app.log", nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("POST /snapshot with Authorization %q: %d, want 401", auth, resp.StatusCode)
			}
		}
		noEnv := exec.Command(e.bin, "snapshot", "--incremental", "app.log", "--admin", admin)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, adminTokenEnv+"=") {
				noEnv.Env = append(noEnv.Env, kv)
			}
		}
		if out, err := noEnv.CombinedOutput(); err == nil || !strings.Contains(string(out), "missing or wrong admin token") {
			t.Errorf("sluice snapshot without a token: %v %s", err, out)
		}
		if out, err := exec.Command(e.bin, "snapshot", "--incremental", "app.log", "--admin", admin, "--token", "nope").CombinedOutput(); err == nil || !strings.Contains(string(out), "missing or wrong admin token") {
			t.Errorf("sluice snapshot with a wrong token: %v %s", err, out)
		}
		time.Sleep(time.Second)
		if s := httpGet(t, "http://"+admin+"/status"); strings.Contains(s, "app.log") {
			t.Fatalf("a refused command started a snapshot: %s", s)
		}
		evs, err := e.readers["file"]()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Op == "r" {
				t.Fatalf("a refused command delivered snapshot rows")
			}
		}
		// The right token (from the environment): the snapshot runs.
		if out, err := exec.Command(e.bin, "snapshot", "--incremental", "app.log", "--admin", admin).CombinedOutput(); err != nil || !strings.Contains(string(out), "incremental snapshot of app.log started") {
			t.Fatalf("sluice snapshot with the token: %v %s\n%s", err, out, log.String())
		}
		e.waitAll(t, 20, log)
		// And from --token, by --config.
		if out, err := exec.Command(e.bin, "snapshot", "--incremental", "app.log", "--config", e.config, "--token", token).CombinedOutput(); err != nil || !strings.Contains(string(out), "started") {
			t.Errorf("sluice snapshot --token: %v %s", err, out)
		}
		if strings.Contains(log.String(), token) {
			t.Errorf("the token is in the log:\n%s", log.String())
		}
		if !strings.Contains(log.String(), "admin command refused") {
			t.Errorf("refused commands not logged:\n%s", log.String())
		}
	})
}
