package binlog

// SkipChecksums turns off checksum verification in ReadStream, so that
// fuzzing reaches the event decoders; it returns a function that restores it.
func SkipChecksums() (restore func()) {
	skipChecksumForFuzzing = true
	return func() { skipChecksumForFuzzing = false }
}

// SetShowEventsPage sets how many events one SHOW BINLOG EVENTS of GTIDAt
// reads, so that tests cross page boundaries; it returns a function that
// restores it.
func SetShowEventsPage(n int) (restore func()) {
	old := showEventsPage
	showEventsPage = n
	return func() { showEventsPage = old }
}

// Reads is how many table definitions s has read from information_schema.
func (s *InfoSchema) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}
