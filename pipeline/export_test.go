package pipeline

// SetAfterCapture sets the hook run between the schema history's capture
// and the snapshot (nil removes it).
func SetAfterCapture(f func()) { afterCapture = f }
