// Package evalcmd is the tidybot eval command: its flags, and a run of
// the evaluation suite against the configured (or a simulated) model.
package evalcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/internal/config"
	"github.com/tidybot/tidybot/internal/eval"
	"github.com/tidybot/tidybot/internal/sim"
)

// Wiring is what the eval command needs from cmd/tidybot: where it
// prints, how the settings are checked, and the model and engine
// configuration chat and serve use.
type Wiring struct {
	Stdout, Stderr io.Writer
	Validate       func(cfg config.Config) error
	Model          func(cfg config.Config) agent.Model
	Engine         func(cfg config.Config) agent.Config
	// Runs opens the bot's store for reading (--from-feedback); Redact
	// hides the configured secrets in what it prints.
	Runs   func(ctx context.Context) (RunStore, error)
	Redact *agent.Redactor
}

// Run runs the evaluation suite (internal/eval) against the configured
// model, each task on its own in-process fake Todoist: no Todoist account
// is needed or touched. With -sim the model is a script (internal/sim),
// and the report says so. Like a test runner, it fails (a non-nil
// error, so a non-zero exit) when the suite's pass^k is below -min-pass;
// the last line says the score and the threshold.
func Run(ctx context.Context, cfg config.Config, args []string, m Wiring) error {
	fs, f := Flags(m.Stderr)
	k, run, asJSON, parallel, simulated, fault := f.k, f.run, f.asJSON, f.parallel, f.simulated, f.fault
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("eval: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("eval: unexpected argument %q (try tidybot eval -h)", fs.Arg(0))
	}
	if *f.fromFeedback {
		return fromFeedback(ctx, m)
	}
	if *k < 1 || *parallel < 1 {
		return fmt.Errorf("eval: -k and -parallel must be at least 1")
	}
	if *f.minPass < 0 || *f.minPass > 1 {
		return fmt.Errorf("eval: -min-pass %v: want a share from 0 to 1", *f.minPass)
	}
	var re *regexp.Regexp
	if *run != "" {
		var err error
		if re, err = regexp.Compile(*run); err != nil {
			return fmt.Errorf("eval: -run: %w", err)
		}
	}
	suite := eval.Suite()
	if len(eval.Select(suite, re)) == 0 {
		return fmt.Errorf("eval: -run %q matches no task", *run)
	}
	if *fault != "" && (!*simulated || !slices.Contains(sim.Faults, sim.Fault(*fault))) {
		return fmt.Errorf("eval: -sim-fault %q: want -sim and one of %s", *fault, faultNames())
	}
	if *simulated {
		srv, err := sim.StartModel((&sim.Solver{Suite: suite, Fault: sim.Fault(*fault)}).Reply, 0)
		if err != nil {
			return err
		}
		defer srv.Close()
		cfg.OpenAIKey, cfg.OpenAIBaseURL, cfg.OpenAIModel = "sk-simulated", srv.URL, "simulated"
		if *fault != "" {
			cfg.OpenAIModel += " (fault: " + *fault + ")"
		}
	}
	// The suite runs on fake accounts: the check of TODOIST_TOKEN does
	// not apply, every other setting is checked as chat checks it.
	check := cfg
	check.TodoistToken = "unused by eval"
	if err := m.Validate(check); err != nil {
		return err
	}

	progress := eval.PrintProgress(m.Stderr)
	rep := eval.Run(ctx, suite, eval.Options{
		Model:    m.Model(cfg),
		Engine:   m.Engine(cfg),
		K:        *k,
		Run:      re,
		Parallel: *parallel,
		Progress: progress,
	})
	if progress != nil {
		progress(eval.Progress{}) // end the progress line
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("eval: interrupted: %w", err)
	}
	if rep.Err != nil {
		return fmt.Errorf("eval: stopped: %w", rep.Err)
	}
	rep.Model, rep.Protocol, rep.Simulated = cfg.OpenAIModel, cfg.Protocol, *simulated
	write := rep.WriteTable
	if *asJSON {
		write = rep.WriteJSON
	}
	if err := write(m.Stdout); err != nil {
		return fmt.Errorf("eval: writing the report: %w", err)
	}
	return verdict(m.Stdout, rep, *f.minPass, !*asJSON)
}

// verdict fails the run when its pass^k is below min, as a test runner
// fails on a failed test: the returned error is the last line printed
// (cmd/tidybot prints it to stderr and exits 1). A run that meets min
// ends the table with the same figures (not the JSON, which stays one
// document).
func verdict(w io.Writer, rep eval.Report, min float64, table bool) error {
	score := fmt.Sprintf("pass^%d %.2f", rep.K, rep.Total.PassK)
	if rep.Total.PassK < min {
		failed := rep.Failed()
		return fmt.Errorf("eval: FAIL: %s is below -min-pass %.2f (%d of %d tasks failed an attempt: %s)",
			score, min, len(failed), len(rep.Tasks), strings.Join(failed, ", "))
	}
	if table {
		if _, err := fmt.Fprintf(w, "\nok: %s, -min-pass %.2f\n", score, min); err != nil {
			return fmt.Errorf("eval: writing the report: %w", err)
		}
	}
	return nil
}

type options struct {
	k, parallel       *int
	minPass           *float64
	run, fault        *string
	asJSON, simulated *bool
	fromFeedback      *bool
}

// Flags is eval's command line; its usage goes to out.
func Flags(out io.Writer) (*flag.FlagSet, options) {
	fs := flag.NewFlagSet("tidybot eval", flag.ContinueOnError)
	fs.SetOutput(out)
	var f options
	f.k = fs.Int("k", 3, "attempts per task; pass^k counts a task solved only if every attempt solves it")
	f.run = fs.String("run", "", "run only the tasks whose name matches this regular expression")
	f.asJSON = fs.Bool("json", false, "print the report as JSON instead of a table")
	f.parallel = fs.Int("parallel", 1, "attempts run at once")
	f.minPass = fs.Float64("min-pass", 1, "exit non-zero when the suite's pass^k (the share of tasks every attempt solved, 0 to 1) is below this")
	f.simulated = fs.Bool("sim", false, "SIMULATED: a scripted model plays the suite's reference solutions (no model needed; shows the output format)")
	f.fault = fs.String("sim-fault", "", "with -sim, a deliberate mistake: "+faultNames())
	f.fromFeedback = fs.Bool("from-feedback", false, "run nothing: print a draft task (Go source for internal/eval/suite.go) for each run rated 👎, from the database (TIDYBOT_DB or TIDYBOT_DATABASE_URL)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tidybot eval [-k 3] [-run REGEXP] [-json] [-parallel N] [-min-pass 1] [-sim [-sim-fault NAME]]\n       tidybot eval -from-feedback\n\n"+
			"Runs %d tasks against the model set by OPENAI_* and TIDYBOT_PROTOCOL and a fake Todoist.\n\n", len(eval.Suite()))
		fs.PrintDefaults()
	}
	return fs, f
}

func faultNames() string {
	var names []string
	for _, f := range sim.Faults {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

// fromFeedback prints the draft tasks of the runs rated 👎.
func fromFeedback(ctx context.Context, m Wiring) error {
	if m.Runs == nil {
		return errors.New("eval: -from-feedback: no database to read")
	}
	st, err := m.Runs(ctx)
	if err != nil {
		return fmt.Errorf("eval: -from-feedback: %w", err)
	}
	n, err := FromFeedback(ctx, m.Stdout, st, m.Redact)
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintln(m.Stderr, "No run is rated 👎 yet: nothing to draft.")
	}
	return nil
}
