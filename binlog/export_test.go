package binlog

// SkipChecksums turns off checksum verification in ReadStream, so that
// fuzzing reaches the event decoders; it returns a function that restores it.
func SkipChecksums() (restore func()) {
	skipChecksumForFuzzing = true
	return func() { skipChecksumForFuzzing = false }
}
