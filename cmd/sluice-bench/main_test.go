package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSluiceBinary: --sluice names an executable file, which is taken as
// is (made absolute); a missing one, a directory or a file that cannot be
// run is refused with an error that says to build it with make build.
// Without --sluice the binary is sluice beside sluice-bench (here the test
// binary, which has no sluice beside it).
func TestSluiceBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "sluice")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := sluiceBinary(exe)
	if err != nil || got != exe {
		t.Errorf("sluiceBinary(%s) = %q, %v; want it back", exe, got, err)
	}
	t.Chdir(dir)
	if got, err := sluiceBinary("sluice"); err != nil || got != exe {
		t.Errorf("sluiceBinary(sluice) in %s = %q, %v; want %s", dir, got, err, exe)
	}
	for _, bad := range []string{filepath.Join(dir, "missing"), dir, plain} {
		_, err := sluiceBinary(bad)
		if err == nil || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), bad) {
			t.Errorf("sluiceBinary(%s) = %v; want an error naming it and saying to build it with make build", bad, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	beside := filepath.Join(filepath.Dir(self), "sluice")
	if _, err := sluiceBinary(""); err == nil || !strings.Contains(err.Error(), beside) {
		t.Errorf(`sluiceBinary("") = %v; want an error naming %s`, err, beside)
	}
}

// TestParseFlavors: --flavors takes mariadb and mysql in any case and
// order, and refuses anything else or nothing.
func TestParseFlavors(t *testing.T) {
	got, err := parseFlavors([]string{" MySQL", "mariadb"})
	if err != nil || len(got) != 2 || got[0] != "mysql" || got[1] != "mariadb" {
		t.Errorf("parseFlavors(MySQL, mariadb) = %v, %v", got, err)
	}
	for _, bad := range [][]string{nil, {"postgres"}} {
		if got, err := parseFlavors(bad); err == nil {
			t.Errorf("parseFlavors(%q) = %v, want an error", bad, got)
		}
	}
}
