package bench

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/position"
)

// buildSluice builds the sluice binary the benchmark runs as its child.
func buildSluice(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestSnapshotBench runs `sluice-bench snapshot`'s code path at a tiny
// size on each server: the tables are written, every reader (the server's
// own dump tool and sluice to none and to Debezium JSON) reads every case,
// the rows sluice reports equal the tables', its consistent snapshot
// reports its lock method and the time writers were blocked, and the table
// and the verdict name the flavor's dump tool.
func TestSnapshotBench(t *testing.T) {
	bin := buildSluice(t)
	testenv.ForEachFlavor(t, func(t *testing.T, flavor position.Flavor) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var log bytes.Buffer
		db, sizes, err := PrepareSnapshot(ctx, flavor, 3000, 700, &log)
		if err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		defer db.Close()
		if sizes.ShortRows != 3000 || sizes.LongRows != 700 || sizes.ShortBytes <= 0 || sizes.LongBytes <= 0 {
			t.Fatalf("sizes %+v", sizes)
		}

		// The dump measured (to /dev/null) really dumps the rows.
		cmd, _, err := dumpCommand(ctx, db, []string{"short_table"})
		if err != nil {
			t.Fatal(err)
		}
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", DumpName(flavor), err, stderr.String())
		}
		if d := out.String(); !strings.Contains(d, "INSERT INTO `short_table` VALUES") || !strings.Contains(d, "(1,1,1),") || !strings.Contains(d, "(3000,3000,3000)") {
			t.Fatalf("%s wrote no rows of short_table:\n%s", DumpName(flavor), lastLines(out.String(), 20))
		}
		if v, err := DumpVersion(db); err != nil || !strings.HasPrefix(v, DumpName(flavor)) {
			t.Fatalf("DumpVersion = %q, %v", v, err)
		}

		results, err := RunSnapshot(ctx, db, sizes, SnapshotOptions{Modes: SnapshotAllModes, Parallel: 2, Chunk: 500, Self: bin, NoQuietWait: true, Log: &log})
		if err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		wantMethod := map[position.Flavor]string{position.MariaDB: "backup-stage", position.MySQL: "global-read-lock"}[flavor]
		cases := sizes.Cases()
		modes := SnapshotAllModes
		if len(results) != len(cases)*len(modes) {
			t.Fatalf("%d results, want %d: %+v", len(results), len(cases)*len(modes), results)
		}
		written := map[string]int64{}
		for i, r := range results {
			c, mode := cases[i/len(modes)], modes[i%len(modes)]
			written[c.Name+" "+mode] = r.OutBytes
			if r.Case != c.Name || r.Mode != mode || r.Rows != c.Rows || r.Bytes != c.Bytes {
				t.Errorf("result %d: %+v, want case %s mode %s rows %d bytes %d", i, r, c.Name, mode, c.Rows, c.Bytes)
			}
			if r.Seconds <= 0 || r.MaxRSS <= 0 || r.RowsPerSec() <= 0 || r.MiBPerSec() <= 0 {
				t.Errorf("%s %s: no measurement: %+v", r.Case, r.Mode, r)
			}
			switch mode {
			case SnapshotDump:
				if r.Method != "" || r.Blocked != 0 || r.OutBytes != 0 {
					t.Errorf("%s %s: %+v", r.Case, r.Mode, r)
				}
				// The dump is far smaller than this test binary, whose
				// peak its rusage maxrss inherits: the figure is its own.
				if self := hwm("self"); r.MaxRSS >= self {
					t.Errorf("%s %s: max RSS %d, this process's own peak %d", r.Case, r.Mode, r.MaxRSS, self)
				}
			case SnapshotDbzEmbedded:
				if r.Method != "" || r.OutBytes <= 0 || r.SteadySeconds < 0 || r.FirstRows != 1 || r.OwnSeconds <= r.SteadySeconds {
					t.Errorf("%s %s: %+v", r.Case, r.Mode, r)
				}
			default:
				// (The steady time of so few rows may round to 0.)
				if r.SteadySeconds < 0 || r.FirstRows <= 0 || r.FirstRows > r.Rows {
					t.Errorf("%s %s: no steady rate: %+v", r.Case, r.Mode, r)
				}
				if r.Method != wantMethod || r.Blocked <= 0 || r.Blocked > 10*time.Second {
					t.Errorf("%s %s: method %q, writers blocked %v; want %s and a time", r.Case, r.Mode, r.Method, r.Blocked, wantMethod)
				}
				if (mode != SnapshotNone) != (r.OutBytes > 0) {
					t.Errorf("%s %s: output %d bytes", r.Case, r.Mode, r.OutBytes)
				}
			}
		}
		// sluice's format debezium and Debezium's JsonConverter wrote the
		// same records (compared value by value in cmd/sluice's oracle
		// tests): here, about the same bytes.
		for _, c := range cases {
			if a, b := written[c.Name+" "+SnapshotDbz], written[c.Name+" "+SnapshotDbzEmbedded]; a < b*9/10 || a > b*11/10 {
				t.Errorf("%s: sluice wrote %d bytes of Debezium JSON, Debezium %d", c.Name, a, b)
			}
		}
		var rep bytes.Buffer
		ReportSnapshot(&rep, flavor, results)
		lines, _ := SnapshotVerdict(flavor, results)
		for _, want := range []string{"÷ " + DumpName(flavor), "sluice ÷ Debezium", "| both", " " + DumpName(flavor) + " ", wantMethod} {
			if !strings.Contains(rep.String(), want) {
				t.Errorf("the table lacks %q:\n%s", want, rep.String())
			}
		}
		if len(lines) != 3 || !strings.Contains(lines[0], DumpName(flavor)) || !strings.Contains(lines[2], "writers blocked") {
			t.Errorf("verdict: %q", lines)
		}
		t.Logf("\n%s\n%s", rep.String(), strings.Join(lines, "\n"))
	})
}
