//go:build !linux

package main

// closeDebezium: the Debezium oracle runs on Linux only (its JVM dies with
// the test binary through Pdeathsig).
func closeDebezium() {}
