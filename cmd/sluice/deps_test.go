package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryShipsNoHarness keeps the test and benchmark harness out of
// bin/sluice (issue 16): no server starter, fake broker, fault proxy,
// benchmark or datadriven package is linked, and no package imports the
// standard library's testing. (Vitess's go/vt/log imports testing from
// v0.24 on, for testing.Testing(): go.mod keeps Vitess at v0.23 until a
// release drops that import.)
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
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, h := range harness {
			if strings.HasPrefix(pkg, h) {
				t.Errorf("bin/sluice links %s, which belongs to the tests or benchmarks", pkg)
			}
		}
		for imp := range strings.FieldsSeq(imports) {
			if imp == "testing" {
				t.Errorf("%s imports testing: keep test code out of the shipped binary (for a dependency, take a release without that import)", pkg)
			}
		}
	}
}
