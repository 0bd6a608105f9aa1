package inspector

import (
	"bytes"
	_ "embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

//go:embed page.html
var pageHTML string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"dur":  Dur,
	"num":  num,
	"join": strings.Join,
}).Parse(pageHTML))

// num prints 12345 as 12,345.
func num(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + num(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Handler serves GET /runs/{id}?sig=… : the run's page, to holders of a
// valid signed link only. Anything else (no, a wrong, an expired or
// another run's signature, an unknown run) is the same 404, so a link
// says nothing about which runs exist.
type Handler struct {
	src    Source
	signer *Signer
	red    *agent.Redactor
	log    *slog.Logger
}

// NewHandler returns the page handler. red hides configured secrets (nil:
// none); log gets the errors of the store (nil: discarded).
func NewHandler(src Source, signer *Signer, red *agent.Redactor, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{src: src, signer: signer, red: red, log: log}
}

// ServeHTTP implements http.Handler; the route must name the run {id}.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	header(w)
	id := r.PathValue("id")
	if id == "" || !h.signer.Verify(id, r.URL.Query().Get("sig")) {
		http.Error(w, "Not found: this link is wrong or has expired.", http.StatusNotFound)
		return
	}
	run, err := h.src.Run(r.Context(), id)
	if errors.Is(err, bot.ErrNotFound) {
		http.Error(w, "Not found: this link is wrong or has expired.", http.StatusNotFound)
		return
	}
	if err != nil {
		h.log.Error("run page: read run", slog.String("run_id", id), slog.Any("err", err))
		http.Error(w, "Something went wrong on our side.", http.StatusInternalServerError)
		return
	}
	v, err := Build(run, h.red)
	if err != nil {
		h.log.Error("run page: build", slog.String("run_id", id), slog.Any("err", err))
		http.Error(w, "Something went wrong on our side.", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, v); err != nil {
		h.log.Error("run page: render", slog.String("run_id", id), slog.Any("err", err))
		http.Error(w, "Something went wrong on our side.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// header sets what every answer carries: no script may run, the page is
// framed nowhere, and the signed address leaks to no other site or cache.
func header(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "private, no-store")
	h.Set("X-Frame-Options", "DENY")
}
