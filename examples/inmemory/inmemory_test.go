package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// The DDL of the README.
var schema = []string{
	"CREATE DATABASE ads",
	`CREATE TABLE ads.campaigns (
		id     BIGINT UNSIGNED NOT NULL PRIMARY KEY,
		name   VARCHAR(200) NOT NULL,
		budget DECIMAL(12,2) NOT NULL,
		active BOOLEAN NOT NULL DEFAULT TRUE
	)`,
	`CREATE TABLE ads.banners (
		id          BIGINT UNSIGNED NOT NULL PRIMARY KEY,
		campaign_id BIGINT UNSIGNED NOT NULL,
		url         VARCHAR(2000) NOT NULL,
		price       DECIMAL(10,4) NOT NULL,
		KEY (campaign_id)
	)`,
}

// startServer starts a server of flavor with the schema and runs seed
// (in the database ads).
func startServer(t *testing.T, flavor position.Flavor, seed ...string) *testenv.Server {
	t.Helper()
	db := testenv.StartT(t, testenv.Options{Flavor: flavor})
	if err := db.Exec(context.Background(), append(append(slices.Clone(schema), "USE ads"), seed...)...); err != nil {
		t.Fatal(err)
	}
	return db
}

func testConfig(t *testing.T, db *testenv.Server) Config {
	t.Helper()
	src, err := binlog.ParseSourceURL(db.URL())
	if err != nil {
		t.Fatal(err)
	}
	src.MaxBackoff = 500 * time.Millisecond
	return Config{Source: src, DB: "ads", Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

// start runs Run in the background until the test ends and waits for the
// first load. The returned function stops it and returns Run's result.
func start(t *testing.T, cfg Config, store *Store) (stop func() error, failed <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- Run(ctx, cfg, store, func() { close(ready) }) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() { cancel(); result = <-done })
		return result
	}
	t.Cleanup(func() { stop() })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run ended before the first load: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("no first load after 90s")
	}
	return stop, done
}

// binlogEnd is the server's current end of binlog.
func binlogEnd(t *testing.T, db *testenv.Server) position.Position {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := binlog.BinlogPosition(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// catchUp waits until the store has applied the binlog up to the server's
// current end.
func catchUp(t *testing.T, db *testenv.Server, store *Store, failed <-chan error) {
	t.Helper()
	end := binlogEnd(t, db)
	deadline := time.After(60 * time.Second)
	for store.Position().Compare(end) < 0 {
		select {
		case err := <-failed:
			t.Fatalf("Run stopped: %v", err)
		case <-deadline:
			t.Fatalf("the store is at %s after 60s, the server at %s", store.Position(), end)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func query(t *testing.T, db *testenv.Server, q string, each func(rs func(col int) string)) {
	t.Helper()
	res, err := db.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < res.RowNumber(); i++ {
		each(func(col int) string {
			s, err := res.GetString(i, col)
			if err != nil {
				t.Fatal(err)
			}
			return strings.Clone(s)
		})
	}
}

func atoi(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func serverBanners(t *testing.T, db *testenv.Server, q string) []Banner {
	out := []Banner{}
	query(t, db, q, func(c func(int) string) {
		out = append(out, Banner{ID: atoi(t, c(0)), CampaignID: atoi(t, c(1)), URL: c(2), Price: c(3)})
	})
	return out
}

// compare checks the store against SELECTs of both tables.
func compare(t *testing.T, db *testenv.Server, store *Store) {
	t.Helper()
	campaigns := []Campaign{}
	query(t, db, "SELECT id, name, budget, active FROM ads.campaigns ORDER BY id", func(c func(int) string) {
		campaigns = append(campaigns, Campaign{ID: atoi(t, c(0)), Name: c(1), Budget: c(2), Active: c(3) != "0"})
	})
	all := serverBanners(t, db, "SELECT id, campaign_id, url, price FROM ads.banners ORDER BY id")
	visible := serverBanners(t, db, "SELECT b.id, b.campaign_id, b.url, b.price FROM ads.banners b JOIN ads.campaigns c ON c.id = b.campaign_id ORDER BY b.id")

	if got := store.Campaigns(); !slices.Equal(got, campaigns) {
		report(t, "campaigns", got, campaigns, func(c Campaign) uint64 { return c.ID })
	}
	if got := store.AllBanners(); !slices.Equal(got, all) {
		report(t, "banners", got, all, func(b Banner) uint64 { return b.ID })
	}
	if got := store.VisibleBanners(); !slices.Equal(got, visible) {
		report(t, "visible banners", got, visible, func(b Banner) uint64 { return b.ID })
	}
	byCampaign := map[uint64][]Banner{}
	for _, b := range visible {
		byCampaign[b.CampaignID] = append(byCampaign[b.CampaignID], b)
	}
	for _, c := range campaigns {
		if got := store.Banners(c.ID); !slices.Equal(got, byCampaign[c.ID]) {
			t.Errorf("Banners(%d): %v, server %v", c.ID, got, byCampaign[c.ID])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	st := store.Stats()
	if st.Campaigns != len(campaigns) || st.Banners != len(all) || st.Visible != len(visible) {
		t.Fatalf("stats %+v; server: %d campaigns, %d banners, %d visible", st, len(campaigns), len(all), len(visible))
	}
}

// report names the first rows that differ.
func report[T comparable](t *testing.T, what string, got, want []T, id func(T) uint64) {
	t.Helper()
	g, w := map[uint64]T{}, map[uint64]T{}
	for _, x := range got {
		g[id(x)] = x
	}
	for _, x := range want {
		w[id(x)] = x
	}
	n := 0
	for k, x := range w {
		if y, ok := g[k]; !ok || y != x {
			if n++; n <= 5 {
				t.Errorf("%s: id %d: store %+v (present %v), server %+v", what, k, y, ok, x)
			}
		}
	}
	for k, y := range g {
		if _, ok := w[k]; !ok {
			if n++; n <= 10 {
				t.Errorf("%s: id %d: store %+v, not on the server", what, k, y)
			}
		}
	}
	t.Errorf("%s: %d rows differ (store %d rows, server %d)", what, n, len(got), len(want))
}

func cents(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(strings.Replace(s, ".", "", 1), 10, 64)
	if err != nil {
		t.Errorf("budget %q: %v", s, err)
	}
	return n
}

// TestCopyUnderWrites: writers insert, update and delete campaigns and
// banners (deleting campaigns that have banners and creating them again,
// moving banners between campaigns, changing ids) before, during and after
// the load; once they stop and the store has caught up with the server, it
// holds exactly what SELECTs return. Meanwhile readers check that they
// never see half a transaction: transfers between campaigns 1 and 2, each
// in one transaction spread over several chunks, keep their total.
func TestCopyUnderWrites(t *testing.T) {
	testenv.ForEachFlavor(t, copyUnderWrites)
}

func copyUnderWrites(t *testing.T, flavor position.Flavor) {
	const campaigns, banners = 200, 3000
	db := startServer(t, flavor)
	ctx := context.Background()
	from, setup := db.SeqFrom(1, banners)
	if err := db.Exec(ctx, append(append(setup, "USE ads"),
		fmt.Sprintf("INSERT INTO ads.campaigns SELECT seq, CONCAT('Kampagne Nº', seq, ' ✓'), IF(seq <= 2, 1000000, seq * 1.25), seq %% 3 > 0 FROM %s WHERE seq <= %d", from, campaigns),
		// Some banners point at campaigns that do not exist (yet).
		fmt.Sprintf("INSERT INTO ads.banners SELECT seq, seq %% %d + 1, CONCAT('https://cdn.example/b/', seq, '.png'), seq / 1000 FROM %s", campaigns+30, from),
	)...); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var writes, failures atomic.Int64
	var wg sync.WaitGroup
	// The writers stop when the test does, also when it fails early.
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			nextBanner := 1_000_000 * (w + 1)
			for !stop.Load() {
				c := rng.IntN(campaigns+30-2) + 3 // campaigns 1 and 2 are the transfer pair
				b := rng.IntN(banners) + 1
				var stmts []string
				switch rng.IntN(12) {
				case 0: // delete a campaign that has banners, keeping them
					stmts = []string{fmt.Sprintf("DELETE FROM ads.campaigns WHERE id = %d", c)}
				case 1: // (re)create a campaign: its banners show again
					stmts = []string{fmt.Sprintf("INSERT INTO ads.campaigns VALUES (%d, 'back %d', %d.%02d, TRUE) ON DUPLICATE KEY UPDATE name = VALUES(name)", c, rng.IntN(1000), rng.IntN(10000), rng.IntN(100))}
				case 2:
					stmts = []string{fmt.Sprintf("UPDATE ads.campaigns SET budget = budget + 0.05, active = NOT active, name = CONCAT(LEFT(name, 50), '+') WHERE id = %d", c)}
				case 3: // a campaign with its banners goes, and comes back, in one transaction
					stmts = []string{"BEGIN",
						fmt.Sprintf("DELETE FROM ads.banners WHERE campaign_id = %d", c),
						fmt.Sprintf("DELETE FROM ads.campaigns WHERE id = %d", c),
						fmt.Sprintf("INSERT INTO ads.campaigns VALUES (%d, 'reborn', 1.00, FALSE)", c),
						fmt.Sprintf("INSERT INTO ads.banners VALUES (%d, %d, 'https://x/reborn', 0.0001)", nextBanner, c),
						"COMMIT"}
					nextBanner++
				case 4:
					stmts = []string{fmt.Sprintf("INSERT INTO ads.banners VALUES (%d, %d, 'https://cdn.example/new/%d', %d.%04d)", nextBanner, c, nextBanner, rng.IntN(10), rng.IntN(10000))}
					nextBanner++
				case 5:
					stmts = []string{fmt.Sprintf("UPDATE ads.banners SET price = price * 1.1 + 0.0001, url = CONCAT(LEFT(url, 100), '#') WHERE id = %d", b)}
				case 6: // move a banner to another campaign
					stmts = []string{fmt.Sprintf("UPDATE ads.banners SET campaign_id = %d WHERE id = %d", c, b)}
				case 7:
					stmts = []string{fmt.Sprintf("DELETE FROM ads.banners WHERE id = %d", b)}
				case 8: // change a banner's id
					stmts = []string{fmt.Sprintf("UPDATE IGNORE ads.banners SET id = id + 10000000 WHERE id = %d", b)}
				case 9: // many banners of a campaign range at once
					stmts = []string{fmt.Sprintf("UPDATE ads.banners SET price = price + 0.0002 WHERE campaign_id BETWEEN %d AND %d", c, c+5)}
				default: // a transfer: one transaction, several chunks
					d := rng.IntN(500) + 1
					stmts = []string{"BEGIN",
						fmt.Sprintf("UPDATE ads.campaigns SET budget = budget - %d.01 WHERE id = 1", d),
						fmt.Sprintf("UPDATE ads.banners SET price = price + 0.0001 WHERE id BETWEEN %d AND %d", b, b+150),
						fmt.Sprintf("UPDATE ads.campaigns SET budget = budget + %d.01 WHERE id = 2", d),
						"COMMIT"}
				}
				// A writer waiting for another's row locks gives up
				// soon (as a deadlock would): on MySQL the snapshot's
				// table flush can otherwise leave the holder waiting on
				// the waiter until innodb_lock_wait_timeout (50 s).
				stmts = append([]string{"SET SESSION innodb_lock_wait_timeout = 2"}, stmts...)
				if err := db.Exec(ctx, stmts...); err != nil {
					failures.Add(1) // deadlocks and duplicate keys: rolled back
				} else {
					writes.Add(1)
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // writes before the load

	cfg := testConfig(t, db)
	cfg.ChunkBytes = 8 << 10 // small chunks: large transactions arrive in several
	// MySQL: writers waiting for each other's row locks can keep the
	// snapshot's lock from being taken; give up soon and try again.
	cfg.LockTimeout = 2 * time.Second
	store := NewStore("ads")
	stopRun, failed := start(t, cfg, store)
	loadedAt := store.Position()

	// Readers: the pair's total never changes, whatever they catch.
	var readers sync.WaitGroup
	var reads atomic.Int64
	for range 3 {
		readers.Go(func() {
			for !stop.Load() {
				cs := store.Campaigns()
				if len(cs) < 2 || cs[0].ID != 1 || cs[1].ID != 2 {
					t.Errorf("campaigns 1 and 2 missing: %v", cs[:min(2, len(cs))])
					return
				}
				if sum := cents(t, cs[0].Budget) + cents(t, cs[1].Budget); sum != 200000000 {
					t.Errorf("half a transfer seen: budgets %s + %s", cs[0].Budget, cs[1].Budget)
					return
				}
				if c, bs, ok := store.Lookup(1); !ok || c.ID != 1 || slices.ContainsFunc(bs, func(b Banner) bool { return b.CampaignID != 1 }) {
					t.Errorf("Lookup(1): %+v %v %v", c, bs, ok)
					return
				}
				reads.Add(1)
			}
		})
	}

	time.Sleep(2 * time.Second) // writes while streaming
	stop.Store(true)
	wg.Wait()
	readers.Wait()
	if t.Failed() {
		t.FailNow()
	}
	catchUp(t, db, store, failed)
	compare(t, db, store)

	st := store.Stats()
	t.Logf("%d writes (%d rolled back), loaded at %s; %s; %d consistent reads", writes.Load(), failures.Load(), loadedAt, st, reads.Load())
	if st.Txns == 0 || st.Chunked == 0 || st.Visible == st.Banners || reads.Load() == 0 {
		t.Fatalf("the test did not exercise enough: %+v, %d reads", st, reads.Load())
	}
	if err := stopRun(); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

// TestReloadAfterDDL: a DDL statement can change rows without a row event
// (narrowing a DECIMAL rounds every value; TRUNCATE is a statement): the
// tables are read again, and the copy stays exact.
func TestReloadAfterDDL(t *testing.T) {
	testenv.ForEachFlavor(t, reloadAfterDDL)
}

func reloadAfterDDL(t *testing.T, flavor position.Flavor) {
	db := startServer(t, flavor,
		"INSERT INTO ads.campaigns VALUES (1, 'one', 10.25, TRUE), (2, 'two', 20.75, FALSE)",
		"INSERT INTO ads.banners VALUES (1, 1, 'a', 1.5), (2, 2, 'b', 2.5), (3, 3, 'c', 3.5)",
	)
	store := NewStore("ads")
	_, failed := start(t, testConfig(t, db), store)
	compare(t, db, store)

	if err := db.Exec(context.Background(),
		"INSERT INTO ads.campaigns VALUES (3, 'three', 30.35, TRUE)",
		"ALTER TABLE ads.campaigns MODIFY budget DECIMAL(12,1) NOT NULL", // 10.25 -> 10.3, with no row event
		"UPDATE ads.campaigns SET name = 'uno' WHERE id = 1",
		"TRUNCATE TABLE ads.banners",
		"INSERT INTO ads.banners VALUES (4, 3, 'd', 4.5), (5, 9, 'e', 5.5)",
		"DELETE FROM ads.campaigns WHERE id = 2",
	); err != nil {
		t.Fatal(err)
	}
	catchUp(t, db, store, failed)
	compare(t, db, store)
	if c, _ := store.Campaign(1); c != (Campaign{1, "uno", "10.3", true}) {
		t.Fatalf("campaign 1: %+v", c)
	}
	if st := store.Stats(); st.Loads < 2 {
		t.Fatalf("no reload after DDL: %+v", st)
	}
}

// TestLoadRetriesAfterLockTimeout (MySQL only: MariaDB's snapshot takes
// no lock): a writer waiting for the row lock of an open transaction keeps
// the snapshot's lock from being taken within its timeout; Run does not
// give up but tries again, and once the transaction has ended loads what
// the server holds.
func TestLoadRetriesAfterLockTimeout(t *testing.T) {
	if !slices.Contains(testenv.Flavors(), position.MySQL) {
		t.Skip("MySQL only, and SLUICE_TEST_FLAVORS leaves it out")
	}
	db := startServer(t, position.MySQL, "INSERT INTO ads.campaigns VALUES (1, 'one', 1.00, TRUE)")
	ctx := context.Background()
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for _, q := range []string{"BEGIN", "UPDATE ads.campaigns SET budget = 2.00 WHERE id = 1"} {
		if _, err := holder.Execute(q); err != nil {
			t.Fatal(err)
		}
	}
	waiter, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Execute("UPDATE ads.campaigns SET name = 'uno' WHERE id = 1")
		waited <- err
	}()
	time.Sleep(1200 * time.Millisecond) // the waiter shows as a query running for a second

	var log syncBuffer
	cfg := testConfig(t, db)
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&log, t.Output()), &slog.HandlerOptions{Level: slog.LevelWarn}))
	store := NewStore("ads")
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, ready := make(chan error, 1), make(chan struct{})
	go func() { done <- Run(rctx, cfg, store, func() { close(ready) }) }()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(log.String(), "trying again") {
		select {
		case err := <-done:
			t.Fatalf("Run ended behind the open transaction: %v", err)
		case <-ready:
			t.Fatal("loaded while the waiter held up the snapshot's lock")
		case <-deadline:
			t.Fatal("no lock timeout after 60s")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := holder.Execute("COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the waiting UPDATE: %v", err)
	}
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	case <-deadline:
		t.Fatal("no load after the transaction ended")
	}
	catchUp(t, db, store, done)
	compare(t, db, store)
	if c, _ := store.Campaign(1); c != (Campaign{1, "uno", "2.00", true}) {
		t.Fatalf("campaign 1: %+v", c)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

// syncBuffer is a bytes.Buffer for one writer and one reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCommand runs the program as main does, until its context ends
// (what Ctrl-C does), and checks the flags.
func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--source"},
		{[]string{"--source", "http://x"}, "must look like mysql://"},
		{[]string{"--source", "mysql://u:p@h:1", "--print-every", "0s"}, "--print-every"},
		{[]string{"--source", "mysql://u:p@h:1", "extra"}, "unexpected"},
		{[]string{"--nope"}, "not defined"},
	} {
		var errOut syncBuffer
		err := run(context.Background(), tc.args, &syncBuffer{}, &errOut)
		if err == nil || !strings.Contains(err.Error()+errOut.String(), tc.want) {
			t.Errorf("%q: %v (%s), want %q", tc.args, err, errOut.String(), tc.want)
		}
	}

	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) { command(t, flavor) })
}

// command runs the program against a server of flavor.
func command(t *testing.T, flavor position.Flavor) {
	db := startServer(t, flavor, "INSERT INTO ads.campaigns VALUES (7, 'seven', 7.00, TRUE)", "INSERT INTO ads.banners VALUES (1, 7, 'a', 1), (2, 8, 'b', 2)")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--source", db.URL(), "--db", "ads", "--print-every", "50ms"}, &out, &errOut)
	}()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(out.String(), "campaigns=1 banners=2 (visible 1, held back 1)") {
		select {
		case err := <-done:
			t.Fatalf("run ended: %v\n%s\n%s", err, out.String(), errOut.String())
		case <-deadline:
			t.Fatalf("no summary after 60s:\n%s\n%s", out.String(), errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := db.Exec(context.Background(), "INSERT INTO ads.campaigns VALUES (8, 'eight', 8.00, TRUE)"); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(out.String(), "campaigns=2 banners=2 (visible 2, held back 0) txns=1") {
		select {
		case <-deadline:
			t.Fatalf("the insert never showed:\n%s\n%s", out.String(), errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after its context ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop after its context ended")
	}
	if !strings.Contains(errOut.String(), "tables loaded") {
		t.Errorf("log:\n%s", errOut.String())
	}

	// The real program: Ctrl-C (SIGINT) ends it cleanly, with status 0;
	// a usage mistake gives status 2.
	bin := filepath.Join(t.TempDir(), "inmemory")
	if b, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	if err := exec.Command(bin).Run(); err == nil || err.(*exec.ExitError).ExitCode() != 2 {
		t.Errorf("no --source: %v, want exit status 2", err)
	}
	var pout, perr syncBuffer
	cmd := exec.Command(bin, "--source", db.URL(), "--print-every", "50ms")
	cmd.Stdout, cmd.Stderr = &pout, &perr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for !strings.Contains(pout.String(), "campaigns=2 banners=2 (visible 2, held back 0)") {
		select {
		case err := <-waited:
			t.Fatalf("the program ended: %v\n%s\n%s", err, pout.String(), perr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("no summary from the program after 60s:\n%s\n%s", pout.String(), perr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("after SIGINT: %v\n%s", err, perr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the program did not stop after SIGINT")
	}
}
