package impl

// The engine's driver is a wrap.Meter (vmm/wrap): every call it makes, failed or not, counts once in
// Stats.DriverCalls. What remains here is how the engine undoes a step.

// retry runs an undo step (unmap, release, free address) until it succeeds, a few times: a failed driver
// call changes nothing, so retrying is safe, and an injected fault fails one call only. It reports whether
// the step finally succeeded; callers park what could not be undone in the orphan lists.
func retry(f func() error) error {
	var err error
	for i := 0; i < 4; i++ {
		if err = f(); err == nil {
			return nil
		}
	}
	return err
}
