package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryShipsNoHarness keeps the test and benchmark harness out of
// bin/sluice (issue 16): no server starter, fake broker, fault proxy,
// benchmark or datadriven package is linked. The one exception is the
// standard library's testing package, which Vitess's go/vt/log imports
// (for testing.Testing(), to choose its log format) and which the DDL
// parser (internal/sqlstmt) needs: the test fails if anything else brings
// it in.
func TestBinaryShipsNoHarness(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	harness := []string{
		"github.com/sluice-cdc/sluice/internal/testenv",
		"github.com/sluice-cdc/sluice/internal/bench",
		"github.com/sluice-cdc/sluice/internal/workload",
		"github.com/sluice-cdc/sluice/cmd/sluice-bench",
		"github.com/twmb/franz-go/pkg/kfake",
		"github.com/Shopify/toxiproxy",
		"github.com/cockroachdb/datadriven",
		"net/http/httptest",
		"testing/",
	}
	allowTesting := map[string]bool{"vitess.io/vitess/go/vt/log": true}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, h := range harness {
			if strings.HasPrefix(pkg, h) {
				t.Errorf("bin/sluice links %s, which belongs to the tests or benchmarks", pkg)
			}
		}
		for imp := range strings.FieldsSeq(imports) {
			if imp == "testing" && !allowTesting[pkg] {
				t.Errorf("%s imports testing: keep test code out of the shipped binary", pkg)
			}
		}
	}
}
