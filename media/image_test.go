package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"testing"
)

func pngOf(t testing.TB, w, h int) []byte {
	t.Helper()
	im := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		im.Set(x, h/2, color.Black)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, im); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webpWithFrame is a WebP file whose VP8X header declares a canvas of
// cw×ch and whose VP8 key frame header declares fw×fh
// (developers.google.com/speed/webp/docs/riff_container; RFC 6386
// section 9.1: a 3-byte frame tag, the start code 9d 01 2a, then 14-bit
// width and height).
func webpWithFrame(cw, ch, fw, fh int) []byte {
	chunk := func(id string, data []byte) []byte {
		out := append([]byte(id), binary.LittleEndian.AppendUint32(nil, uint32(len(data)))...)
		out = append(out, data...)
		if len(data)%2 == 1 {
			out = append(out, 0)
		}
		return out
	}
	vp8x := []byte{0, 0, 0, 0, byte(cw - 1), byte((cw - 1) >> 8), byte((cw - 1) >> 16), byte(ch - 1), byte((ch - 1) >> 8), byte((ch - 1) >> 16)}
	frame := []byte{0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a, byte(fw), byte(fw >> 8), byte(fh), byte(fh >> 8)}
	frame = append(frame, make([]byte, 64)...)
	body := append([]byte("WEBP"), chunk("VP8X", vp8x)...)
	body = append(body, chunk("VP8 ", frame)...)
	return append(append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...), body...)
}

func TestImageOverThePixelBudgetIsNotDecoded(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		w, h int
	}{
		{"png 9000x9000", pngHeaderOnly(t, 9000, 9000), 9000, 9000},
		// x/image/webp decodes the VP8 frame's size, not the canvas's.
		{"webp canvas 2000x2000, frame 16000x16000", webpWithFrame(2000, 2000, 16000, 16000), 16000, 16000},
		{"webp canvas 16000x16000", webpWithFrame(16000, 16000, 100, 100), 16000, 16000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FitImage(t.Context(), tt.data)
			var big *TooLargeError
			if !errors.As(err, &big) || big.Width != tt.w || big.Height != tt.h {
				t.Fatalf("err %v, want too large at %dx%d", err, tt.w, tt.h)
			}
		})
	}
	if _, _, err := imageConfig(webpWithFrame(2000, 2000, 1000, 1000)); err != nil {
		t.Errorf("a webp within the budget: %v", err)
	}
}

// pngHeaderOnly is a PNG signature and IHDR chunk declaring w×h.
func pngHeaderOnly(t testing.TB, w, h int) []byte {
	t.Helper()
	full := pngOf(t, 1, 1)
	ihdr := full[:33]
	out := bytes.Clone(ihdr)
	binary.BigEndian.PutUint32(out[16:], uint32(w))
	binary.BigEndian.PutUint32(out[20:], uint32(h))
	binary.BigEndian.PutUint32(out[29:], crc32.ChecksumIEEE(out[12:29]))
	return append(out, full[33:]...)
}

// TestAnimatedGIFGoesAsItsFirstFrame: the model takes no animated GIF;
// only the first frame is decoded and sent, as a PNG.
func TestAnimatedGIFGoesAsItsFirstFrame(t *testing.T) {
	var g gif.GIF
	pal := color.Palette{color.White, color.Black}
	for i := range 50 {
		f := image.NewPaletted(image.Rect(0, 0, 200, 100), pal)
		f.SetColorIndex(i, 0, 1)
		g.Image = append(g.Image, f)
		g.Delay = append(g.Delay, 10)
	}
	var buf bytes.Buffer
	if err := gif.EncodeAll(&buf, &g); err != nil {
		t.Fatal(err)
	}
	im, err := FitImage(t.Context(), buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got, err := png.Decode(bytes.NewReader(im.Data))
	if err != nil || im.MIME != "image/png" || got.Bounds().Dx() != 200 {
		t.Fatalf("sent %s (%v), want the first frame as a 200 px PNG", im.MIME, err)
	}
	if r, _, _, _ := got.At(0, 0).RGBA(); r != 0 {
		t.Error("pixel (0,0) is not the first frame's black")
	}
}

// BenchmarkFitImage: what reading a photo costs. The bomb (a PNG header
// declaring 30000x30000) is refused from its header; a 12-megapixel
// photo is decoded and scaled down (-benchmem shows the memory).
func BenchmarkFitImage(b *testing.B) {
	cases := []struct {
		name string
		data []byte
	}{
		{"bomb 30000x30000", pngHeaderOnly(b, 30000, 30000)},
		{"photo 4000x3000", pngOf(b, 4000, 3000)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				_, _ = FitImage(b.Context(), c.data)
			}
		})
	}
}
