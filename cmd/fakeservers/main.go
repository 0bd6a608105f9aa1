// Command fakeservers serves the project's fakes of Todoist, OpenAI, Slack
// and Telegram on local ports, for `make fakes-check`: the check
// (internal/fakescheck) drives each with the vendor's own client from npm.
//
// It prints one JSON line on stdout naming each fake's base URL, token and
// the objects it seeded, then serves until its standard input closes (the
// check's end) or it is interrupted. A small control server (the "control"
// URL) lets the check push what a person would do on the platform:
//
//	POST {control}/telegram/text?chat=&user=&text=      → {"update_id": n}
//	POST {control}/telegram/callback?chat=&user=&message=&data= → {"update_id": n}
//	POST {control}/slack/assistant?user=&viewing=      → {"channel": …, "thread_ts": …}
//
// Nothing here is used by tidybot itself.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fakeservers:", err)
		os.Exit(1)
	}
}

// info is the line printed on stdout.
type info struct {
	Todoist  todoistInfo  `json:"todoist"`
	OpenAI   openaiInfo   `json:"openai"`
	Slack    slackInfo    `json:"slack"`
	Telegram telegramInfo `json:"telegram"`
	Control  string       `json:"control"`
}

type todoistInfo struct {
	// Origin is the base the SDK takes (it adds /api/v1/).
	Origin    string    `json:"origin"`
	OAuth     oauthInfo `json:"oauth"`
	Token     string    `json:"token"`
	InboxID   string    `json:"inbox_id"`
	ProjectID string    `json:"project_id"`
	SectionID string    `json:"section_id"`
	TaskID    string    `json:"task_id"`
	Label     string    `json:"label"`
}

// oauthInfo is a second fake Todoist, with OAuth (team mode): an app
// and a person signed in (Session, their browser's cookie) who has not
// authorized it yet.
type oauthInfo struct {
	// Origin is both the API's and the OAuth endpoints' base.
	Origin       string `json:"origin"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	RedirectURL  string `json:"redirect_url"`
	Cookie       string `json:"cookie"`
}

type openaiInfo struct {
	// BaseURL ends in /v1, as OPENAI_BASE_URL does.
	BaseURL string `json:"base_url"`
	Key     string `json:"key"`
	// Voice is a voice note the transcription endpoint accepts, base64.
	Voice []byte `json:"voice"`
}

type slackInfo struct {
	// APIURL ends in /api/, as SLACK_API_URL does.
	APIURL   string `json:"api_url"`
	Token    string `json:"token"`
	AppToken string `json:"app_token"`
	BotUser  string `json:"bot_user"`
}

type telegramInfo struct {
	// APIRoot is TELEGRAM_API_URL (no /bot).
	APIRoot string `json:"api_root"`
	Token   string `json:"token"`
	FileID  string `json:"file_id"`
}

const openaiKey = "sk-fakescheck"

func run(stdin io.Reader, stdout io.Writer) error {
	td := todoisttest.New(nil, todoisttest.WithTimezone("Europe/Berlin"))
	defer td.Close()
	proj := td.AddProject(todoisttest.Project{Name: "Groceries"})
	sec := td.AddSection(todoisttest.Section{ProjectID: proj.ID, Name: "Dairy"})
	lbl := td.AddLabel(todoisttest.Label{Name: "errand"})
	task := td.AddTask(todoisttest.Task{Content: "Buy milk", ProjectID: proj.ID, SectionID: sec.ID, Labels: []string{lbl.Name},
		Due: &todoisttest.Due{Date: "2026-12-01", String: "Dec 1", Lang: "en"}})
	td.SeedTalkInbox()

	svc := todoisttest.NewService(nil)
	defer svc.Close()
	app := todoisttest.App{ClientID: "fakescheck", ClientSecret: "fakescheck-secret", RedirectURL: "https://bot.example/todoist/callback"}
	svc.RegisterApp(app)
	person := svc.NewAccount(todoisttest.WithUser("Pat Doe", "pat@example.com"))
	defer person.Close()

	oa := openaitest.New(nil, openaitest.WithAPIKey(openaiKey),
		openaitest.WithTranscripts(func(openaitest.Transcription) string { return openaitest.VoiceNoteText }))
	defer oa.Close()

	sl := slacktest.New()
	defer sl.Close()
	sl.Grant("chat:write", "im:history", "channels:history", "assistant:write")

	tg := telegramtest.New()
	defer tg.Close()
	fileID := tg.AddFile("voice", "ogg", openaitest.VoiceNote)

	ctl := httptest.NewServer(control(tg, sl))
	defer ctl.Close()

	line, err := json.Marshal(info{
		Todoist: todoistInfo{Origin: origin(td.URL), Token: td.Token, InboxID: td.InboxID(), ProjectID: proj.ID,
			SectionID: sec.ID, TaskID: task.ID, Label: lbl.Name,
			OAuth: oauthInfo{Origin: svc.AuthURL, ClientID: app.ClientID, ClientSecret: app.ClientSecret, RedirectURL: app.RedirectURL,
				Cookie: todoisttest.SessionCookie + "=" + person.Session}},
		OpenAI:   openaiInfo{BaseURL: oa.URL, Key: openaiKey, Voice: openaitest.VoiceNote},
		Slack:    slackInfo{APIURL: sl.URL, Token: slacktest.Token, AppToken: slacktest.AppToken, BotUser: slacktest.BotUserID},
		Telegram: telegramInfo{APIRoot: tg.URL, Token: tg.Token, FileID: fileID},
		Control:  ctl.URL,
	})
	if err != nil {
		return fmt.Errorf("encoding the servers' addresses: %w", err)
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return fmt.Errorf("writing the servers' addresses: %w", err)
	}

	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case <-done:
	case <-sig:
	}
	return nil
}

// origin strips the fake Todoist's /api/v1 from its URL: the SDK takes the
// origin and adds the API path itself.
func origin(apiURL string) string {
	const suffix = "/api/v1"
	if len(apiURL) >= len(suffix) && apiURL[len(apiURL)-len(suffix):] == suffix {
		return apiURL[:len(apiURL)-len(suffix)]
	}
	return apiURL
}

// control serves the pushes of the package comment.
func control(tg *telegramtest.Server, sl *slacktest.Server) http.Handler {
	mux := http.NewServeMux()
	num := func(r *http.Request, name string) (int64, error) {
		n, err := strconv.ParseInt(r.FormValue(name), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return n, nil
	}
	mux.HandleFunc("POST /telegram/text", func(w http.ResponseWriter, r *http.Request) {
		chat, err1 := num(r, "chat")
		user, err2 := num(r, "user")
		if err1 != nil || err2 != nil {
			http.Error(w, fmt.Sprint(err1, err2), http.StatusBadRequest)
			return
		}
		writeID(w, tg.PushText(chat, user, r.FormValue("text")))
	})
	mux.HandleFunc("POST /telegram/callback", func(w http.ResponseWriter, r *http.Request) {
		chat, err1 := num(r, "chat")
		user, err2 := num(r, "user")
		msg, err3 := num(r, "message")
		if err1 != nil || err2 != nil || err3 != nil {
			http.Error(w, fmt.Sprint(err1, err2, err3), http.StatusBadRequest)
			return
		}
		writeID(w, tg.PushCallback(chat, user, int(msg), r.FormValue("data")))
	})
	mux.HandleFunc("POST /slack/assistant", func(w http.ResponseWriter, r *http.Request) {
		user := r.FormValue("user")
		ts, _ := sl.StartAssistantThread(user, r.FormValue("viewing"))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"channel": sl.IM(user), "thread_ts": ts})
	})
	return mux
}

func writeID(w http.ResponseWriter, id int) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"update_id": id})
}
