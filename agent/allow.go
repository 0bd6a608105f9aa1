package agent

import "slices"

// allowed reports whether the run may take the action named name
// (Input.Allow).
func (r *runner) allowed(name string) bool {
	return len(r.tr.Allow) == 0 || slices.Contains(r.tr.Allow, name)
}

// allowedTools keeps the tools allow names (all when allow is empty), so
// the model is not even offered an action the run may not take.
func allowedTools(ts []Tool, allow []string) []Tool {
	if len(allow) == 0 {
		return ts
	}
	out := ts[:0:0]
	for _, t := range ts {
		if slices.Contains(allow, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// outside returns a task w would change that the run may not touch
// (Input.Touch), or "".
func (r *runner) outside(w writer) string {
	tw, ok := w.(toucher)
	if len(r.tr.Touch) == 0 || !ok {
		return ""
	}
	for _, id := range tw.touches() {
		if !slices.Contains(r.tr.Touch, id) {
			return id
		}
	}
	return ""
}
