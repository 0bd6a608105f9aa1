package bot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // decoders for image.Decode
	"image/jpeg"
	"image/png"
	"log/slog"
	"net/http"

	"golang.org/x/image/draw"
	"golang.org/x/image/webp"

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
	im, err := fitImage(ctx, data)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.log.Warn("read photo", slog.String("thread_key", in.ThreadKey()), slog.Any("err", err))
		text := "Sorry, I can't read that image; send a JPEG, PNG, WEBP or GIF photo."
		var big *tooLargeError
		if errors.As(err, &big) {
			text = big.tooLargeText()
		}
		b.send(ctx, in.Platform, reply(in, text))
		return nil, nil
	}
	return im, nil
}

// MaxImagePixels is the most pixels of one image the bot decodes: a
// phone camera's 12 to 48 megapixels fit, and an image that declares
// more (an 875 KB PNG can declare 30000x30000, 900 MB once decoded) is
// refused from its header alone, before anything is decoded.
const MaxImagePixels = 40_000_000

// decodeSlot lets one image at a time be decoded in this process, so the
// memory decoding takes is bounded by one image of MaxImagePixels (at
// most 8 bytes a pixel, a 16-bit PNG: 320 MB), however many photos
// arrive at once.
var decodeSlot = make(chan struct{}, 1)

// tooLargeError is an image over MaxImagePixels.
type tooLargeError struct{ w, h int }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("bot: image of %dx%d pixels is over the %d pixel limit", e.w, e.h, MaxImagePixels)
}

// tooLargeText is what the user is told about such an image.
func (e *tooLargeError) tooLargeText() string {
	mp := (int64(e.w)*int64(e.h) + 500_000) / 1_000_000
	return fmt.Sprintf("Sorry, that image is too large for me to look at: %d×%d pixels (%d megapixels); I take up to %d megapixels. Please send a smaller one.",
		e.w, e.h, mp, MaxImagePixels/1_000_000)
}

// imageConfig reads data's header: its size and format. An image whose
// decoding would hold more than MaxImagePixels fails with a
// *tooLargeError. For WebP that is also the size of the frame the decoder
// reads, which a VP8X header's canvas size need not match.
func imageConfig(data []byte) (image.Config, string, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return cfg, format, fmt.Errorf("bot: read image: %w", err)
	}
	w, h := cfg.Width, cfg.Height
	if format == "webp" {
		fw, fh, err := webpFrameSize(data)
		if err != nil {
			return cfg, format, fmt.Errorf("bot: read webp frame: %w", err)
		}
		if int64(fw)*int64(fh) > int64(w)*int64(h) {
			w, h = fw, fh
		}
	}
	if w <= 0 || h <= 0 || int64(w)*int64(h) > MaxImagePixels {
		return cfg, format, &tooLargeError{w: w, h: h}
	}
	return cfg, format, nil
}

// webpFrameSize returns the size of a WebP file's first VP8 or VP8L
// chunk, the frame golang.org/x/image/webp decodes (RIFF chunks: a
// FourCC, a little-endian uint32 size, the data padded to an even
// length; developers.google.com/speed/webp/docs/riff_container).
func webpFrameSize(data []byte) (w, h int, err error) {
	if len(data) < 12 {
		return 0, 0, errors.New("short file")
	}
	p := data[12:]
	for len(p) >= 8 {
		id, n := string(p[:4]), int64(binary.LittleEndian.Uint32(p[4:8]))
		n = min(n, int64(len(p)-8))
		if id == "VP8 " || id == "VP8L" {
			chunk := p[:8+n]
			riff := make([]byte, 0, 12+len(chunk))
			riff = append(riff, "RIFF"...)
			riff = binary.LittleEndian.AppendUint32(riff, uint32(4+len(chunk)))
			riff = append(riff, "WEBP"...)
			riff = append(riff, chunk...)
			cfg, err := webp.DecodeConfig(bytes.NewReader(riff))
			if err != nil {
				return 0, 0, err
			}
			return cfg.Width, cfg.Height, nil
		}
		p = p[min(int64(len(p)), 8+n+n&1):]
	}
	return 0, 0, nil
}

// fitImage returns data as an image the model takes: as it is when it is
// a JPEG, PNG or WEBP no larger than MaxImageSide, else decoded, scaled
// down and encoded as JPEG. A GIF is always decoded: only its first
// frame is read (image/gif's Decode) and sent as a PNG, since the model
// takes no animated GIF (platform.openai.com/docs/guides/images-vision)
// and its other frames are never decoded. An image over MaxImagePixels
// fails with a *tooLargeError before any of it is decoded.
func fitImage(ctx context.Context, data []byte) (*agent.Image, error) {
	cfg, format, err := imageConfig(data)
	if err != nil {
		return nil, err
	}
	small := max(cfg.Width, cfg.Height) <= MaxImageSide
	if small && format != "gif" {
		return &agent.Image{MIME: http.DetectContentType(data), Data: data}, nil
	}
	select {
	case decodeSlot <- struct{}{}:
		defer func() { <-decodeSlot }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("bot: decode %s image: %w", format, err)
	}
	var out bytes.Buffer
	if small {
		if err := png.Encode(&out, src); err != nil {
			return nil, fmt.Errorf("bot: encode image: %w", err)
		}
		return &agent.Image{MIME: "image/png", Data: out.Bytes()}, nil
	}
	w, h := cfg.Width, cfg.Height
	if w >= h {
		w, h = MaxImageSide, max(1, h*MaxImageSide/w)
	} else {
		w, h = max(1, w*MaxImageSide/h), MaxImageSide
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	if err := jpeg.Encode(&out, dst, &jpeg.Options{Quality: 85}); err != nil {
		return nil, fmt.Errorf("bot: encode image: %w", err)
	}
	return &agent.Image{MIME: "image/jpeg", Data: out.Bytes()}, nil
}
