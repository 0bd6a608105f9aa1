package discord

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/bot"
)

var _ bot.Downloader = (*Adapter)(nil)

// attachment returns a message's first audio file (a voice message is
// one: audio/ogg with a duration) or image, or nil
// (discord.com/developers/docs/resources/message#attachment-object).
func attachment(files []*discordgo.MessageAttachment) *bot.Attachment {
	for _, f := range files {
		if f == nil || f.URL == "" {
			continue
		}
		name := f.Filename
		if name == "" {
			name = "file"
		}
		switch {
		case strings.HasPrefix(f.ContentType, "audio/"):
			return &bot.Attachment{Kind: bot.AttachVoice, Ref: f.URL, Name: name, MIME: f.ContentType,
				Duration: time.Duration(f.DurationSecs * float64(time.Second)), Size: int64(f.Size)}
		case strings.HasPrefix(f.ContentType, "image/"):
			return &bot.Attachment{Kind: bot.AttachImage, Ref: f.URL, Name: name, MIME: f.ContentType, Size: int64(f.Size)}
		}
	}
	return nil
}

// cdnHosts are where Discord serves attachments
// (discord.com/developers/docs/reference#image-formatting-image-base-url);
// the configured API host is allowed too (a fake's).
var cdnHosts = []string{"cdn.discordapp.com", "media.discordapp.net"}

// Download implements bot.Downloader: an attachment's URL is a signed
// CDN address that needs no token (so none is sent), fetched only from
// Discord's hosts, and at most limit bytes of it.
func (a *Adapter) Download(ctx context.Context, at bot.Attachment, limit int64) ([]byte, error) {
	if at.Size > limit {
		return nil, fmt.Errorf("discord: download %s: %d bytes: %w", at.Name, at.Size, bot.ErrFileTooLarge)
	}
	u, err := url.Parse(at.Ref)
	if err != nil || !a.cdnHost(u) {
		return nil, fmt.Errorf("discord: download %s: not a Discord attachment address", at.Name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("discord: download %s: %w", at.Name, err)
	}
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("discord: download %s: %w", at.Name, redact(err, a.cfg.Token))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("discord: download %s: %s", at.Name, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("discord: download %s: %w", at.Name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("discord: download %s: over %d bytes: %w", at.Name, limit, bot.ErrFileTooLarge)
	}
	return data, nil
}

func (a *Adapter) cdnHost(u *url.URL) bool {
	if u.Scheme == "https" {
		for _, h := range cdnHosts {
			if u.Host == h {
				return true
			}
		}
	}
	base, err := url.Parse(a.cfg.APIURL)
	return err == nil && base.Host != "discord.com" && u.Host == base.Host && u.Scheme == base.Scheme
}
