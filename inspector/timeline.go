package inspector

import (
	"fmt"
	"time"
)

// Timeline is the geometry of the per-step time drawing: one row per
// step, a bar each for model time, Todoist time and waiting for the user.
type Timeline struct {
	Width, Height int
	Rows          []Row
}

// Row is one step's bars.
type Row struct {
	Y, TextY int
	Label    string
	Total    string
	Bars     []Bar
}

// Bar is one rectangle.
type Bar struct {
	X, Y, W int
	Class   string
	Title   string
}

// Drawing sizes, in SVG user units (the drawing scales to the screen).
const (
	tlLabel  = 52
	tlBars   = 230
	tlTotal  = 78
	tlRow    = 22
	tlBarH   = 14
	tlMargin = 4
)

// timeline lays out one row per step. A wait for the user can be hours
// while work is seconds, so a wait longer than the longest working step
// is drawn that long and cut (class "cut"), its real length in the text.
func timeline(steps []Step) Timeline {
	var maxWork, maxWait time.Duration
	for _, s := range steps {
		maxWork = max(maxWork, s.ModelDur+s.TaskDur)
		maxWait = max(maxWait, s.Wait)
	}
	capWait := maxWork
	if capWait == 0 {
		capWait = maxWait
	}
	var longest time.Duration
	for _, s := range steps {
		longest = max(longest, s.ModelDur+s.TaskDur+min(s.Wait, capWait))
	}
	t := Timeline{Width: tlLabel + tlBars + tlTotal, Height: max(len(steps), 1)*tlRow + 2*tlMargin}
	scale := func(d time.Duration) int {
		if longest <= 0 || d <= 0 {
			return 0
		}
		return max(int(float64(d)/float64(longest)*tlBars), 1)
	}
	for i, s := range steps {
		y := tlMargin + i*tlRow
		r := Row{Y: y + (tlRow-tlBarH)/2, TextY: y + tlRow/2 + 4, Label: fmt.Sprintf("Step %d", s.N), Total: Dur(s.ModelDur + s.TaskDur + s.Wait)}
		x := tlLabel
		add := func(d time.Duration, class, what string) {
			if d <= 0 {
				return
			}
			shown := d
			if class == "wait" {
				shown = min(d, capWait)
			}
			w := scale(shown)
			b := Bar{X: x, Y: r.Y, W: w, Class: class, Title: fmt.Sprintf("Step %d: %s %s", s.N, what, Dur(d))}
			if class == "wait" && d > capWait {
				b.Class = "wait cut"
			}
			r.Bars = append(r.Bars, b)
			x += w
		}
		add(s.ModelDur, "model", "model")
		add(s.TaskDur, "todoist", "Todoist")
		add(s.Wait, "wait", "waiting for you")
		t.Rows = append(t.Rows, r)
	}
	return t
}

// Dur prints a duration for people: 0.4ms, 850ms, 2.4s, 3m10s, 2h5m.
func Dur(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

// TotalX is where a row's total is written.
func (t Timeline) TotalX() int { return tlLabel + tlBars + 6 }
