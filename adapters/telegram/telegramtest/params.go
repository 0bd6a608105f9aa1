package telegramtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
)

// maxParams bounds a request body the fake reads (uploads are not among
// the methods it serves).
const maxParams = 10 << 20

// params reads a request's parameters the four ways the Bot API takes
// them: "We support four ways of passing parameters in Bot API requests:
// URL query string, application/x-www-form-urlencoded, application/json
// (except for uploading files), multipart/form-data (use to upload
// files)" (core.telegram.org/bots/api#making-requests). A JSON body's
// values become the text a form would carry: a string as it is, any
// other value (a number, true, an object such as reply_markup, an array
// such as allowed_updates) as its JSON text, which is what the form
// encodings send for them ("Object and Array parameters … must be
// JSON-serialized", ibid.). Body parameters win over the query's, as
// net/http's Form orders them.
func params(r *http.Request) (url.Values, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		r.Body = http.MaxBytesReader(nil, r.Body, maxParams)
		var body map[string]json.RawMessage
		dec := json.NewDecoder(r.Body)
		dec.UseNumber()
		// An empty body: no parameters, as an empty form is (what the
		// Bot API answers to one is undocumented).
		if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("can't parse JSON body: %w", err)
		}
		f := r.URL.Query()
		for k, raw := range body {
			raw = bytes.TrimSpace(raw)
			s := string(raw)
			switch {
			case s == "null": // as if not sent
				continue
			case raw[0] == '"':
				if err := json.Unmarshal(raw, &s); err != nil {
					return nil, fmt.Errorf("can't parse parameter %s: %w", k, err)
				}
			}
			f.Set(k, s)
		}
		return f, nil
	case "multipart/form-data":
		if err := r.ParseMultipartForm(maxParams); err != nil {
			return nil, err
		}
		return r.Form, nil
	default:
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		return r.Form, nil
	}
}
