package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // decoders for image.Decode
	"image/jpeg"
	_ "image/png"
	"log/slog"
	"net/http"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp"

	"github.com/tidybot/tidybot/agent"
)

// MaxImageSide is the longest side of an image sent to the model: larger
// images are scaled down first. OpenAI scales any image to fit 2048 px and
// then its short side to 768 px (platform.openai.com/docs/guides/images-vision),
// so more detail is never seen; 1280 px keeps a handwritten list legible
// in a fraction of the bytes.
const MaxImageSide = 1280

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
// to MaxImageSide. When it cannot, it tells the user why and returns nil.
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
	im, err := fitImage(data)
	if err != nil {
		b.log.Warn("read photo", slog.String("thread_key", in.ThreadKey()), slog.Any("err", err))
		b.send(ctx, in.Platform, reply(in, "Sorry, I can't read that image; send a JPEG, PNG, WEBP or GIF photo."))
		return nil, nil
	}
	return im, nil
}

// fitImage returns data as an image the model takes: as it is when it is
// a JPEG, PNG, WEBP or GIF no larger than MaxImageSide, else decoded,
// scaled down and encoded as JPEG.
func fitImage(data []byte) (*agent.Image, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("bot: read image: %w", err)
	}
	if max(cfg.Width, cfg.Height) <= MaxImageSide {
		return &agent.Image{MIME: http.DetectContentType(data), Data: data}, nil
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("bot: decode %s image: %w", format, err)
	}
	w, h := cfg.Width, cfg.Height
	if w >= h {
		w, h = MaxImageSide, max(1, h*MaxImageSide/w)
	} else {
		w, h = max(1, w*MaxImageSide/h), MaxImageSide
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	var out bytes.Buffer
	if err := jpeg.Encode(&out, dst, &jpeg.Options{Quality: 85}); err != nil {
		return nil, fmt.Errorf("bot: encode image: %w", err)
	}
	return &agent.Image{MIME: "image/jpeg", Data: out.Bytes()}, nil
}
