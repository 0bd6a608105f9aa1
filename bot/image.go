package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/media"
)

// photoless is said when a photo comes without a caption.
const photoless = "(a photo, without a caption)"

// visionOff reports whether photos are not to go to the model: off by
// setting, or, on auto, after the model rejected one.
func (b *Bot) visionOff() bool {
	return b.cfg.Vision == VisionOff || (b.cfg.Vision == VisionAuto && b.noVision.Load())
}

// noVisionText is what a user sending a photo is told when photos are off.
const noVisionText = "I can't look at photos with this model. Pick a vision model (OPENAI_MODEL), or set TIDYBOT_VISION=off to stop me trying; please type what you'd like me to do."

// photo downloads in's image and readies it for the model, scaled down
// to media.MaxImageSide. When it cannot, it tells the user why and returns nil.
func (b *Bot) photo(ctx context.Context, in Incoming) (*agent.Image, error) {
	a := in.Attachment
	d := b.downloader(in.Platform)
	if d == nil {
		b.send(ctx, in.Platform, reply(in, "I can't fetch photos on this platform. Please type what you'd like me to do."))
		return nil, nil
	}
	data, err := d.Download(ctx, *a, MaxFileBytes)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.log.Warn("download photo", slog.String("thread_key", in.ThreadKey()), slog.Any("err", err))
		text := "Sorry, I couldn't download that photo. Please send it again."
		if errors.Is(err, ErrFileTooLarge) {
			text = "Sorry, that image is too large for me to fetch (over 20 MB)."
		}
		b.send(ctx, in.Platform, reply(in, text))
		return nil, nil
	}
	im, err := media.FitImage(ctx, data)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.log.Warn("read photo", slog.String("thread_key", in.ThreadKey()), slog.Any("err", err))
		text := "Sorry, I can't read that image; send a JPEG, PNG, WEBP or GIF photo."
		var big *media.TooLargeError
		if errors.As(err, &big) {
			text = tooLargeText(big)
		}
		b.send(ctx, in.Platform, reply(in, text))
		return nil, nil
	}
	return &agent.Image{MIME: im.MIME, Data: im.Data}, nil
}

// tooLargeText is what the user is told about an image over
// media.MaxImagePixels.
func tooLargeText(e *media.TooLargeError) string {
	mp := (int64(e.Width)*int64(e.Height) + 500_000) / 1_000_000
	return fmt.Sprintf("Sorry, that image is too large for me to look at: %d×%d pixels (%d megapixels); I take up to %d megapixels. Please send a smaller one.",
		e.Width, e.Height, mp, media.MaxImagePixels/1_000_000)
}
