package snapshot

// SetKnob turns a rule of the watermark method off ("no-visible-wait",
// "no-drop"; see knobs) for a test proving the rule is needed, and returns
// the function that turns it back on.
func SetKnob(name string, on bool) (restore func()) {
	k := &knobs.noDrop
	if name == "no-visible-wait" {
		k = &knobs.noVisibleWait
	}
	old := k.Swap(on)
	return func() { k.Store(old) }
}
