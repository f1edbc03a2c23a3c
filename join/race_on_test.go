//go:build race

package join

// raceEnabled: the race detector slows Pebble and the reference down
// tenfold; the long randomized tests run fewer rounds under it (the
// concurrency they check is the same).
const raceEnabled = true
