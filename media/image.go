// Package media readies what people send for the model: images scaled
// down within a pixel budget, and audio measured from its stream rather
// than from what its sender claims. It knows nothing of chats or runs.
package media

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
	"net/http"

	"golang.org/x/image/draw"
	"golang.org/x/image/webp"
)

// Image is an image ready for the model: its media type and bytes.
type Image struct {
	MIME string
	Data []byte
}

// MaxImageSide is the longest side of an image sent to the model: larger
// images are scaled down first. OpenAI scales any image to fit 2048 px and
// then its short side to 768 px (platform.openai.com/docs/guides/images-vision),
// so more detail is never seen; 1280 px keeps a handwritten list legible
// in a fraction of the bytes.
const MaxImageSide = 1280

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

// TooLargeError is an image over MaxImagePixels: Width and Height are
// the size its header declares.
type TooLargeError struct{ Width, Height int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("media: image of %dx%d pixels is over the %d pixel limit", e.Width, e.Height, MaxImagePixels)
}

// imageConfig reads data's header: its size and format. An image whose
// decoding would hold more than MaxImagePixels fails with a
// *TooLargeError. For WebP that is also the size of the frame the decoder
// reads, which a VP8X header's canvas size need not match.
func imageConfig(data []byte) (image.Config, string, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return cfg, format, fmt.Errorf("media: read image: %w", err)
	}
	w, h := cfg.Width, cfg.Height
	if format == "webp" {
		fw, fh, err := webpFrameSize(data)
		if err != nil {
			return cfg, format, fmt.Errorf("media: read webp frame: %w", err)
		}
		if int64(fw)*int64(fh) > int64(w)*int64(h) {
			w, h = fw, fh
		}
	}
	if w <= 0 || h <= 0 || int64(w)*int64(h) > MaxImagePixels {
		return cfg, format, &TooLargeError{Width: w, Height: h}
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

// FitImage returns data as an image the model takes: as it is when it is
// a JPEG, PNG or WEBP no larger than MaxImageSide, else decoded, scaled
// down and encoded as JPEG. A GIF is always decoded: only its first
// frame is read (image/gif's Decode) and sent as a PNG, since the model
// takes no animated GIF (platform.openai.com/docs/guides/images-vision)
// and its other frames are never decoded. An image over MaxImagePixels
// fails with a *TooLargeError before any of it is decoded.
func FitImage(ctx context.Context, data []byte) (Image, error) {
	cfg, format, err := imageConfig(data)
	if err != nil {
		return Image{}, err
	}
	small := max(cfg.Width, cfg.Height) <= MaxImageSide
	if small && format != "gif" {
		return Image{MIME: http.DetectContentType(data), Data: data}, nil
	}
	select {
	case decodeSlot <- struct{}{}:
		defer func() { <-decodeSlot }()
	case <-ctx.Done():
		return Image{}, ctx.Err()
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return Image{}, fmt.Errorf("media: decode %s image: %w", format, err)
	}
	var out bytes.Buffer
	if small {
		if err := png.Encode(&out, src); err != nil {
			return Image{}, fmt.Errorf("media: encode image: %w", err)
		}
		return Image{MIME: "image/png", Data: out.Bytes()}, nil
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
		return Image{}, fmt.Errorf("media: encode image: %w", err)
	}
	return Image{MIME: "image/jpeg", Data: out.Bytes()}, nil
}
