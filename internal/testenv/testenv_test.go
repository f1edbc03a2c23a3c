//go:build unix

package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/position"
)

func TestTwoServers(t *testing.T) {
	ForEachFlavor(t, testTwoServers)
}

func testTwoServers(t *testing.T, flavor position.Flavor) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	optsList := []Options{
		{Flavor: flavor},
		{Flavor: flavor, RowMetadata: "minimal", RowImage: "MINIMAL", ServerID: 7, Compressed: true, MaxBinlogSize: "1M"},
	}
	dbs := make([]*Server, len(optsList))
	errs := make([]error, len(optsList))
	var wg sync.WaitGroup
	for i, o := range optsList {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			dbs[i], errs[i] = Start(ctx, o)
			t.Logf("server %d: Start took %v", i, time.Since(start).Round(time.Millisecond))
		}()
	}
	wg.Wait()
	for _, db := range dbs {
		if db != nil {
			t.Cleanup(func() { _ = db.Close() })
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Start %d: %v", i, err)
		}
	}
	a, b := dbs[0], dbs[1]
	if a.Port == b.Port || a.Dir == b.Dir {
		t.Fatalf("servers share port/dir: %s %s / %s %s", a.Addr(), a.Dir, b.Addr(), b.Dir)
	}
	if want := fmt.Sprintf("mysql://root:sluice@127.0.0.1:%d", a.Port); a.URL() != want {
		t.Errorf("URL() = %q, want %q", a.URL(), want)
	}

	check := func(db *Server, metadata, image string, serverID uint32, compress string) {
		t.Helper()
		q := "SELECT @@binlog_format, @@binlog_row_metadata, @@gtid_strict_mode, @@server_id, " +
			"@@binlog_row_image, @@log_bin_compress, @@binlog_checksum, @@log_bin, @@log_slave_updates"
		gtids := "1"
		if flavor == position.MySQL {
			q = "SELECT @@binlog_format, @@binlog_row_metadata, @@gtid_mode, @@server_id, " +
				"@@binlog_row_image, @@binlog_transaction_compression, @@binlog_checksum, @@log_bin, @@log_replica_updates"
			gtids = "ON"
		}
		r, err := db.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for col := range 9 {
			s, err := r.GetString(0, col)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		want := []string{"ROW", metadata, gtids, fmt.Sprint(serverID), image, compress, "CRC32", "1", "1"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: variables = %v, want %v", db.Addr(), got, want)
		}
	}
	check(a, "FULL", "FULL", 1, "0")
	check(b, "MINIMAL", "MINIMAL", 7, "1")

	// Fresh servers have no GTIDs: account setup is not binlogged.
	gtidVar := "@@gtid_binlog_pos"
	if flavor == position.MySQL {
		gtidVar = "@@gtid_executed"
	}
	if r, err := a.Query(ctx, "SELECT "+gtidVar); err != nil {
		t.Fatal(err)
	} else if s, _ := r.GetString(0, 0); s != "" {
		t.Errorf("fresh server gtid_binlog_pos = %q, want empty", s)
	}

	for _, db := range dbs {
		err := db.Exec(ctx,
			"CREATE DATABASE d",
			"CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB",
			fmt.Sprintf("INSERT INTO d.t VALUES (1, 'server-%d')", db.ServerID),
		)
		if err != nil {
			t.Fatal(err)
		}
	}

	// Errors name the statement.
	if err := a.Exec(ctx, "SELECT 1", "SELEKT nonsense"); err == nil || !strings.Contains(err.Error(), "SELEKT nonsense") {
		t.Errorf("Exec error = %v, want it to name the statement", err)
	}

	// Conn works directly too.
	c, err := b.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute("INSERT INTO d.t VALUES (?, ?)", 2, "prepared"); err != nil {
		t.Fatal(err)
	}
	c.Close()

	oldPid := b.Pid()
	start := time.Now()
	if err := b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Restart took %v", time.Since(start).Round(time.Millisecond))
	if b.Pid() == 0 || b.Pid() == oldPid {
		t.Errorf("pid after restart = %d (before %d)", b.Pid(), oldPid)
	}
	if alive(oldPid) {
		t.Errorf("old server %d still alive after Restart", oldPid)
	}
	r, err := b.Query(ctx, "SELECT v FROM d.t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.RowNumber(); got != 2 {
		t.Fatalf("rows after restart = %d, want 2", got)
	}
	if v, _ := r.GetString(0, 0); v != "server-7" {
		t.Errorf("row 1 after restart = %q", v)
	}
	check(b, "MINIMAL", "MINIMAL", 7, "1")
	if flavor == position.MySQL {
		// Every server has its own server_uuid, though all are copies of
		// one initialized data directory.
		ra, err := a.Query(ctx, "SELECT @@server_uuid")
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.Query(ctx, "SELECT @@server_uuid, @@gtid_executed")
		if err != nil {
			t.Fatal(err)
		}
		ua, _ := ra.GetString(0, 0)
		ub, _ := rb.GetString(0, 0)
		g, _ := rb.GetString(0, 1)
		if ua == ub || ua == "" {
			t.Errorf("server_uuid %q and %q: want two different ones", ua, ub)
		}
		if !strings.HasPrefix(g, ub+":1-") {
			t.Errorf("gtid_executed after restart = %q, want %s:1-N", g, ub)
		}
	} else if r, err := b.Query(ctx, "SELECT @@gtid_binlog_pos"); err != nil {
		t.Fatal(err)
	} else if s, _ := r.GetString(0, 0); !strings.HasPrefix(s, "0-7-") {
		t.Errorf("gtid_binlog_pos after restart = %q, want 0-7-N", s)
	}

	// Kill and restart: crash recovery.
	pid := b.Pid()
	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) || b.Running() {
		t.Fatalf("server %d alive after Kill", pid)
	}
	if err := b.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("Exec on killed server succeeded")
	}
	if err := b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Exec(ctx, "INSERT INTO d.t VALUES (3, 'after-crash')"); err != nil {
		t.Fatal(err)
	}

	// Close kills the process and removes the directory; it is idempotent.
	for _, db := range dbs {
		pid := db.Pid()
		if pid == 0 {
			t.Fatalf("%s not running before Close", db.Addr())
		}
		start := time.Now()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("Close took %v", time.Since(start).Round(time.Millisecond))
		if err := db.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if alive(pid) {
			t.Errorf("server %d still alive after Close", pid)
		}
		if _, err := os.Stat(db.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after Close (%v)", db.Dir, err)
		}
		if err := db.Restart(ctx); err == nil {
			t.Error("Restart after Close succeeded")
		}
	}
}

func TestStartT(t *testing.T) {
	var pid int
	var dir string
	ok := t.Run("inner", func(t *testing.T) {
		db := StartT(t, Options{Extra: []string{"--max-allowed-packet=64M"}})
		pid, dir = db.Pid(), db.Dir
		r, err := db.Query(context.Background(), "SELECT @@max_allowed_packet")
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := r.GetInt(0, 0); v != 64<<20 {
			t.Errorf("max_allowed_packet = %d", v)
		}
	})
	if !ok {
		return
	}
	if pid == 0 || alive(pid) {
		t.Errorf("mariadbd %d alive after subtest cleanup", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after subtest cleanup", dir)
	}
}

func TestStartFailureReportsLog(t *testing.T) {
	ForEachFlavor(t, testStartFailureReportsLog)
}

func testStartFailureReportsLog(t *testing.T, flavor position.Flavor) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := Start(ctx, Options{Flavor: flavor, Extra: []string{"--no-such-option-xyz"}})
	if err == nil {
		db.Close()
		t.Fatal("Start with a bogus option succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-option-xyz") {
		t.Errorf("error does not quote the error log: %v", err)
	}
}

// TestCrashedTestBinaryLeavesNothing re-runs this test binary as a child that
// starts a server and then SIGKILLs itself before any cleanup can run. The
// server must die with it (Pdeathsig), and the next sweep must remove its
// directory.
func TestCrashedTestBinaryLeavesNothing(t *testing.T) {
	if f := os.Getenv("SLUICE_TESTENV_CRASH_CHILD"); f != "" {
		db, err := Start(context.Background(), Options{Flavor: position.Flavor(f)})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(3)
		}
		fmt.Printf("PID %d DIR %s\n", db.Pid(), db.Dir)
		os.Stdout.Sync()
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	ForEachFlavor(t, testCrashedTestBinaryLeavesNothing)
}

func testCrashedTestBinaryLeavesNothing(t *testing.T, flavor position.Flavor) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestCrashedTestBinaryLeavesNothing$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_TESTENV_CRASH_CHILD="+string(flavor))
	out, err := cmd.Output()
	var pid int
	var dir string
	if _, serr := fmt.Sscanf(string(out), "PID %d DIR %s", &pid, &dir); serr != nil {
		t.Fatalf("child output %q (err %v): %v", out, err, serr)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("server %d survived its crashed parent", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("crashed child's dir %s: %v (expected it to still exist before the sweep)", dir, err)
	}
	sweepStaleDirs()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sweepStaleDirs left %s behind (%v)", dir, err)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no procfs
	}
	// pid (comm) state ...; comm may contain spaces and parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// TestClockOffset: a server started with ClockOffset (libfaketime, for
// MySQL through its own loader) reports a clock that far ahead, and
// starts about as quickly as without it.
func TestClockOffset(t *testing.T) {
	ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		const offset = 10 * time.Second
		start := time.Now()
		db := StartT(t, Options{Flavor: flavor, ClockOffset: offset})
		took := time.Since(start)
		r, err := db.Query(context.Background(), "SELECT UNIX_TIMESTAMP(NOW(6))")
		if err != nil {
			t.Fatal(err)
		}
		secs, err := r.GetFloat(0, 0)
		if err != nil {
			s, _ := r.GetString(0, 0)
			fmt.Sscan(s, &secs)
		}
		got := time.Duration(secs*1e9) - time.Duration(time.Now().UnixNano())
		t.Logf("%s started in %v with its clock %v ahead", db.Version(), took.Round(time.Millisecond), got.Round(time.Millisecond))
		if got < offset-time.Second || got > offset+time.Second {
			t.Errorf("the server's clock is %v ahead, want about %v", got, offset)
		}
		if took > 20*time.Second {
			t.Errorf("the server took %v to start under libfaketime", took)
		}
	})
}

// TestReplication: a replica of a testenv server receives its
// transactions with their GTIDs and logs them; stopped, it falls behind;
// promoted, it takes writes of its own.
func TestReplication(t *testing.T) {
	ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		ctx := context.Background()
		primary := StartT(t, Options{Flavor: flavor, ServerID: 1})
		replica := StartT(t, Options{Flavor: flavor, ServerID: 2})
		if err := replica.ReplicateFrom(ctx, primary); err != nil {
			t.Fatal(err)
		}
		if err := primary.Exec(ctx, "CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY)", "INSERT INTO r.t VALUES (1), (2)"); err != nil {
			t.Fatal(err)
		}
		if err := replica.WaitCaughtUp(ctx, primary); err != nil {
			t.Fatal(err)
		}
		rs, err := replica.Query(ctx, "SELECT COUNT(*) FROM r.t")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := rs.GetInt(0, 0); n != 2 {
			t.Fatalf("the replica has %d rows, want 2", n)
		}
		pu, _ := primary.ServerUUID(ctx)
		ru, _ := replica.ServerUUID(ctx)
		if pu == ru || pu == "" {
			t.Fatalf("server identities %q and %q: want two different ones", pu, ru)
		}
		if err := replica.StopReplication(ctx, true); err != nil {
			t.Fatal(err)
		}
		if err := primary.Exec(ctx, "INSERT INTO r.t VALUES (3)"); err != nil {
			t.Fatal(err)
		}
		if err := replica.Promote(ctx); err != nil {
			t.Fatal(err)
		}
		if err := replica.Exec(ctx, "INSERT INTO r.t VALUES (10)"); err != nil {
			t.Fatal(err)
		}
		pg, _ := primary.GTIDExecuted(ctx)
		rg, _ := replica.GTIDExecuted(ctx)
		if pg == rg {
			t.Fatalf("after the promotion both servers have %s", pg)
		}
	})
}
