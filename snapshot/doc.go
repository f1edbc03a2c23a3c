// Package snapshot reads tables for sluice's consistent initial load.
package snapshot
