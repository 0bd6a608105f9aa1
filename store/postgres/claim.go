package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tidybot/tidybot/bot"
)

// ClaimJobs takes up to n ready jobs and hands them to fn, in one
// transaction that holds them: a ready job is the oldest of its
// conversation, so that a conversation's jobs are taken in order and one
// at a time, and a job another transaction holds is skipped (FOR UPDATE
// SKIP LOCKED) along with the rest of its conversation. When fn returns
// nil the jobs are deleted with the transaction's commit; otherwise it
// rolls back and they stay, ready again. A process that dies meanwhile
// ends its connection, which ends the transaction and its locks.
//
// This is the building block of several replicas sharing the queue, not
// yet their lease: bot's scheduler still reads every job at start (Jobs)
// and runs them in this process, and a run outlives the transaction that
// would hold its job. A per-conversation lease that a run holds across
// its steps (issue 25, item 3) is not built.
func (s *Store) ClaimJobs(ctx context.Context, n int, fn func(ctx context.Context, jobs []bot.Job) error) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		// The head of each conversation; a head another transaction
		// holds is skipped, and the conversation's later jobs are not
		// heads, so they wait for it.
		rows, err := tx.Query(ctx, `SELECT seq, value FROM jobs j
			WHERE seq = (SELECT min(seq) FROM jobs h WHERE h.thread_key = j.thread_key)
			ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`, n)
		if err != nil {
			return err
		}
		type rec struct {
			Seq   int64
			Value []byte
		}
		recs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rec])
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		jobs := make([]bot.Job, len(recs))
		seqs := make([]int64, len(recs))
		for i, r := range recs {
			if err := s.decode(ctx, tx, r.Value, &jobs[i]); err != nil {
				return fmt.Errorf("job %d: %w", r.Seq, err)
			}
			seqs[i] = r.Seq
		}
		if err := fn(ctx, jobs); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM jobs WHERE seq = ANY($1)`, seqs)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: claim jobs: %w", err)
	}
	return nil
}
