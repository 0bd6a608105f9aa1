package agent

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// pending is an undo write with the journal summary it reverts.
type pending struct {
	w       Write
	summary string
}

// UndoReport says what an undo did and what it could not do.
type UndoReport struct {
	Undone    []string
	NotUndone []string
}

// Undo reverts journaled writes, newest first, as one batch. A project or
// section a run created is deleted only if nothing else is in it once the
// batch has run (Todoist deletes a section's tasks with it); a deleted
// task cannot come back, and is reported.
func (e *Engine) Undo(ctx context.Context, journal []Applied) (UndoReport, error) {
	var rep UndoReport
	var ws []pending
	var containerDeletes []pending
	for i := len(journal) - 1; i >= 0; i-- {
		a := journal[i]
		if len(a.Inverse) == 0 {
			rep.NotUndone = append(rep.NotUndone, a.Summary)
			continue
		}
		for _, inv := range a.Inverse {
			p := pending{w: inv, summary: a.Summary}
			if inv.Kind == DeleteProject || inv.Kind == DeleteSection {
				containerDeletes = append(containerDeletes, p)
				continue
			}
			ws = append(ws, p)
		}
	}
	if len(containerDeletes) > 0 {
		var err error
		if ws, err = e.emptyContainers(ctx, ws, containerDeletes, &rep); err != nil {
			return rep, err
		}
	}
	if len(ws) == 0 {
		return rep, nil
	}
	writes := make([]Write, len(ws))
	for i, p := range ws {
		writes[i] = p.w
		writes[i].UUID = NewUUID()
	}
	results, err := e.tasks.Apply(ctx, writes)
	if err != nil {
		return rep, fmt.Errorf("undo: apply %d writes: %w", len(writes), err)
	}
	seen := map[string]bool{}
	for i, p := range ws {
		if i < len(results) && results[i].Err != nil {
			rep.NotUndone = append(rep.NotUndone, fmt.Sprintf("%s: %s", p.summary, ErrorMessageOf(results[i].Err)))
			continue
		}
		if !seen[p.summary] {
			seen[p.summary] = true
			rep.Undone = append(rep.Undone, p.summary)
		}
	}
	return rep, nil
}

// emptyContainers adds to ws the deletions of the projects and sections a
// run created that will hold nothing once ws has run; it reports the ones
// kept or already gone in rep.
func (e *Engine) emptyContainers(ctx context.Context, ws, containerDeletes []pending, rep *UndoReport) ([]pending, error) {
	snap, err := e.tasks.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("undo: read projects: %w", err)
	}
	// What each project and section holds once the other undo
	// writes have run.
	leaving := map[string]bool{}
	for _, p := range ws {
		if p.w.Kind == MoveTask || p.w.Kind == DeleteTask {
			leaving[p.w.ID] = true
		}
	}
	remaining := map[string]int{}
	for _, t := range snap.Tasks {
		if !leaving[t.ID] {
			remaining[t.ProjectID]++
			if t.SectionID != "" {
				remaining[t.SectionID]++
			}
		}
	}
	exists := map[string]bool{}
	for _, p := range snap.Projects {
		exists[p.ID] = true
	}
	for _, s := range snap.Sections {
		exists[s.ID] = true
	}
	// Sections first: a project's deletion takes its sections along.
	slices.SortStableFunc(containerDeletes, func(a, b pending) int {
		return cmp.Compare(containerRank(a.w.Kind), containerRank(b.w.Kind))
	})
	for _, p := range containerDeletes {
		switch {
		case !exists[p.w.ID]:
			rep.Undone = append(rep.Undone, p.summary+" (already gone)")
		case remaining[p.w.ID] > 0:
			rep.NotUndone = append(rep.NotUndone, fmt.Sprintf("%s: kept, it holds %s added since", p.summary, plural(remaining[p.w.ID], "other task")))
		default:
			ws = append(ws, p)
		}
	}
	return ws, nil
}

// containerRank orders the deletion of what a run created: sections
// before projects.
func containerRank(k WriteKind) int {
	if k == DeleteProject {
		return 1
	}
	return 0
}

// restoreDue makes inv, the inverse of an update that changes old's due
// date, put back the date Todoist stored: the date (or date and time with
// its zone) and, for a recurring task, its recurrence. Re-sending the old
// due string would read it again relative to today ("tomorrow" moves).
func restoreDue(inv *Write, old Task) {
	if d := old.DueAsStored(); d != nil {
		inv.Due = d
		return
	}
	if old.Due != "" { // only a string is known: the best there is
		inv.DueString = strp(old.Due)
		return
	}
	inv.DueString = strp("no date")
}

// completeInverse undoes closing t. A task is reopened; a recurring task,
// which closing moved to its next date and left open, goes back to the
// occurrence it was at (Todoist documents item_update_date_complete with
// is_forward 0 as the uncompletion of one occurrence:
// developer.todoist.com/api/v1 #tag/Sync/Tasks/Complete-a-recurring-task).
func completeInverse(t Task) []Write {
	if !t.IsRecurring {
		return []Write{{Kind: ReopenTask, ID: t.ID}}
	}
	if d := t.DueAsStored(); d != nil {
		return []Write{{Kind: RestoreOccurrence, ID: t.ID, Due: d}}
	}
	return []Write{{Kind: UpdateTask, ID: t.ID, DueString: strp(t.Due)}}
}
