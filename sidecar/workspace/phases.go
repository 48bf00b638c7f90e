package workspace

import "time"

// phases times the steps of a create or a start, for the debug log: where
// a slow create or resume spends its time.
type phases struct {
	t0, last time.Time
	attrs    []any
}

func newPhases() *phases {
	now := time.Now()
	return &phases{t0: now, last: now}
}

// mark ends the step named name.
func (p *phases) mark(name string) {
	now := time.Now()
	p.attrs = append(p.attrs, name, now.Sub(p.last).Round(10*time.Microsecond))
	p.last = now
}

// log is the steps and the total, as slog attributes.
func (p *phases) log() []any {
	return append(p.attrs, "total", time.Since(p.t0).Round(10*time.Microsecond))
}
