package todoisttest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A small due-string parser (see the package comment for what it
// understands). Dates are computed from now, the user's wall clock.

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "sun": time.Sunday,
	"monday": time.Monday, "mon": time.Monday,
	"tuesday": time.Tuesday, "tue": time.Tuesday, "tues": time.Tuesday,
	"wednesday": time.Wednesday, "wed": time.Wednesday,
	"thursday": time.Thursday, "thu": time.Thursday, "thur": time.Thursday, "thurs": time.Thursday,
	"friday": time.Friday, "fri": time.Friday,
	"saturday": time.Saturday, "sat": time.Saturday,
}

var (
	clockRE  = regexp.MustCompile(`^(.*?)\s*(?:\bat\s+)?\b(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$`)
	inRE     = regexp.MustCompile(`^in (\d+) (day|days|week|weeks|month|months|year|years)$`)
	everyNRE = regexp.MustCompile(`^(\d+) (day|days|week|weeks|month|months|year|years)$`)
)

var dateLayouts = []string{
	"Jan 2", "January 2", "2 Jan", "2 January",
	"Jan 2 2006", "January 2 2006", "2 Jan 2006", "2 January 2006",
	"Jan 2, 2006", "January 2, 2006",
}

// parseDueString turns a due string into a Due, or nil for "no date".
func parseDueString(s string, now time.Time) (*Due, error) {
	orig := strings.TrimSpace(s)
	l := strings.ToLower(orig)
	if l == "" || l == "no date" || l == "no due date" {
		return nil, nil
	}
	now = now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)

	// ISO dates and date-times are taken as they are.
	for _, layout := range []string{time.DateOnly, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.Parse(layout, orig); err == nil {
			d := &Due{String: orig, Lang: "en", Date: t.Format(time.DateOnly)}
			if layout != time.DateOnly {
				d.Date = t.Format("2006-01-02T15:04:05")
			}
			return d, nil
		}
	}
	if t, err := time.Parse(time.RFC3339, orig); err == nil {
		return &Due{String: orig, Lang: "en", Date: t.UTC().Format("2006-01-02T15:04:05Z"), Timezone: "UTC"}, nil
	}

	body, clock := splitClock(l)
	recurring := false
	var day time.Time
	var ok bool
	switch {
	case strings.HasPrefix(body, "every ") || body == "every" || body == "daily" || body == "weekly" || body == "monthly" || body == "yearly":
		recurring = true
		day, ok = firstOccurrence(body, today), true
	default:
		day, ok = parseDay(body, today)
	}
	if !ok {
		return nil, fmt.Errorf("cannot read the date %q", orig)
	}
	d := &Due{String: orig, Lang: "en", IsRecurring: recurring, Date: day.Format(time.DateOnly)}
	if clock != "" {
		d.Date += "T" + clock + ":00"
	}
	return d, nil
}

// splitClock cuts a time of day ("at 5pm", "17:00", "noon") off the end
// of s and returns it as "HH:MM".
func splitClock(s string) (rest, clock string) {
	for _, w := range []string{" at noon", " noon"} {
		if r, ok := strings.CutSuffix(s, w); ok {
			return strings.TrimSpace(r), "12:00"
		}
	}
	m := clockRE.FindStringSubmatch(s)
	if m == nil {
		return s, ""
	}
	// A bare number is a time only with am/pm, a colon, or after "at".
	if m[3] == "" && m[4] == "" && !strings.Contains(s, " at ") {
		return s, ""
	}
	h, _ := strconv.Atoi(m[2])
	mins := 0
	if m[3] != "" {
		mins, _ = strconv.Atoi(m[3])
	}
	switch m[4] {
	case "pm":
		if h < 12 {
			h += 12
		}
	case "am":
		if h == 12 {
			h = 0
		}
	}
	if h > 23 || mins > 59 {
		return s, ""
	}
	rest = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m[1]), " at"))
	if rest == "" {
		rest = "today"
	}
	return rest, fmt.Sprintf("%02d:%02d", h, mins)
}

// parseDay reads a one-off date relative to today.
func parseDay(s string, today time.Time) (time.Time, bool) {
	switch s {
	case "today", "tod", "tonight", "this evening", "this morning":
		return today, true
	case "tomorrow", "tom":
		return today.AddDate(0, 0, 1), true
	case "yesterday":
		return today.AddDate(0, 0, -1), true
	case "next week":
		return mondayAfter(today), true
	case "weekend", "this weekend":
		return nextWeekday(today, time.Saturday), true
	case "next weekend":
		return mondayAfter(today).AddDate(0, 0, 5), true
	case "next month":
		return time.Date(today.Year(), today.Month()+1, 1, 0, 0, 0, 0, time.UTC), true
	case "end of month", "eom":
		return time.Date(today.Year(), today.Month()+1, 0, 0, 0, 0, 0, time.UTC), true
	}
	if wd, ok := weekdays[strings.TrimPrefix(s, "this ")]; ok {
		return nextWeekday(today, wd), true
	}
	if name, ok := strings.CutPrefix(s, "next "); ok {
		if wd, ok := weekdays[name]; ok {
			// The given day of next week (weeks start on Monday).
			return mondayAfter(today).AddDate(0, 0, (int(wd)+6)%7), true
		}
	}
	if m := inRE.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		return addUnit(today, m[2], n), true
	}
	for _, layout := range dateLayouts {
		t, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		if !strings.Contains(layout, "2006") {
			t = t.AddDate(today.Year(), 0, 0)
			if t.Before(today) {
				t = t.AddDate(1, 0, 0)
			}
		}
		return t, true
	}
	return time.Time{}, false
}

// firstOccurrence is the first date of a recurrence ("every mon", "every
// 3 days", "every weekday"), today or later. Patterns it does not know
// start today.
func firstOccurrence(s string, today time.Time) time.Time {
	body := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(s, "every"), " other"))
	body, _, _ = strings.Cut(body, " starting")
	first, _, _ := strings.Cut(body, ",")
	first = strings.TrimSpace(first)
	if first == "weekday" || first == "workday" {
		for today.Weekday() == time.Saturday || today.Weekday() == time.Sunday {
			today = today.AddDate(0, 0, 1)
		}
		return today
	}
	if wd, ok := weekdays[first]; ok {
		return nextWeekday(today, wd)
	}
	return today
}

// nextDue moves a recurring due date to its next occurrence, as closing a
// recurring task does.
func nextDue(d *Due, today time.Time) {
	date, rest, _ := strings.Cut(d.Date, "T")
	from, err := time.Parse(time.DateOnly, date)
	if err != nil {
		from = today
	}
	l := strings.ToLower(d.String)
	body, _ := splitClock(l)
	body = strings.TrimSpace(strings.TrimPrefix(body, "every"))
	step := 1
	if b, ok := strings.CutPrefix(body, "other "); ok {
		body, step = b, 2
	}
	var next time.Time
	switch {
	case body == "day" || body == "" || l == "daily":
		next = from.AddDate(0, 0, step)
	case body == "week" || l == "weekly":
		next = from.AddDate(0, 0, 7*step)
	case body == "month" || l == "monthly":
		next = from.AddDate(0, step, 0)
	case body == "year" || l == "yearly":
		next = from.AddDate(step, 0, 0)
	case body == "weekday" || body == "workday":
		next = from.AddDate(0, 0, 1)
		for next.Weekday() == time.Saturday || next.Weekday() == time.Sunday {
			next = next.AddDate(0, 0, 1)
		}
	default:
		if m := everyNRE.FindStringSubmatch(body); m != nil {
			n, _ := strconv.Atoi(m[1])
			next = addUnit(from, m[2], n)
		} else if _, ok := weekdays[strings.TrimSpace(strings.Split(body, ",")[0])]; ok {
			next = from.AddDate(0, 0, 7*step)
		} else {
			next = from.AddDate(0, 0, 1)
		}
	}
	d.Date = next.Format(time.DateOnly)
	if rest != "" {
		d.Date += "T" + rest
	}
}

func addUnit(t time.Time, unit string, n int) time.Time {
	switch strings.TrimSuffix(unit, "s") {
	case "week":
		return t.AddDate(0, 0, 7*n)
	case "month":
		return t.AddDate(0, n, 0)
	case "year":
		return t.AddDate(n, 0, 0)
	}
	return t.AddDate(0, 0, n)
}

// nextWeekday returns the first day on or after t that is wd.
func nextWeekday(t time.Time, wd time.Weekday) time.Time {
	return t.AddDate(0, 0, (int(wd)-int(t.Weekday())+7)%7)
}

// mondayAfter returns the Monday of the week after t's.
func mondayAfter(t time.Time) time.Time {
	return t.AddDate(0, 0, 7-(int(t.Weekday())+6)%7)
}
