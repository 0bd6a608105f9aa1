package bot

// Link is a button that opens an address: the run's Details page. Only
// UserID may see it: a platform puts it on the message in a direct
// conversation, and in a shared chat shows it to that person alone (or
// leaves it out where it cannot).
type Link struct {
	Label  string
	URL    string
	UserID string
}

// details adds the Details link of run r to m, the run's final message,
// when the bot has a RunLink and it gives an address.
func (b *Bot) details(m Outgoing, r *Run) Outgoing {
	if b.cfg.RunLink == nil {
		return m
	}
	if u := b.cfg.RunLink(r); u != "" {
		m.Link = &Link{Label: "Details", URL: u, UserID: r.UserID}
	}
	return m
}
