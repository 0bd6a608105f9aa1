package bot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
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

func newPhotoHarness(t *testing.T, ag *fakeAgent, vision string, file []byte) *harness {
	t.Helper()
	plat := newTelegram()
	plat.download = func(Attachment, int64) ([]byte, error) { return file, nil }
	return startHarness(t, ag, plat, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}, Vision: vision})
}

func photo(caption, event string) Incoming {
	in := msg(caption, event)
	in.Attachment = &Attachment{Kind: AttachImage, Ref: "p1", Name: "photo.jpg", MIME: "image/jpeg"}
	return in
}

func TestPhotoGoesToTheModel(t *testing.T) {
	small := pngOf(t, 800, 600)
	ag := &fakeAgent{}
	h := newPhotoHarness(t, ag, "", small)
	h.handle(t, photo("Add these to Groceries", "p1"))
	h.handle(t, photo("", "p2"))
	h.idle(t)
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if joined(ag.started) != "Add these to Groceries | "+photoless {
		t.Errorf("runs: %q", ag.started)
	}
	if len(ag.images) != 2 || len(ag.images[0]) != 1 || !bytes.Equal(ag.images[0][0].Data, small) || ag.images[0][0].MIME != "image/png" {
		t.Errorf("images: %d runs, want the photo as it came", len(ag.images))
	}
}

func TestLargePhotoIsScaledDown(t *testing.T) {
	ag := &fakeAgent{}
	h := newPhotoHarness(t, ag, "", pngOf(t, 3000, 1500))
	h.handle(t, photo("Add these to Groceries", "p1"))
	h.idle(t)
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if len(ag.images) != 1 || len(ag.images[0]) != 1 {
		t.Fatalf("images: %v", ag.images)
	}
	im := ag.images[0][0]
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(im.Data))
	if err != nil || im.MIME != "image/jpeg" || cfg.Width != 1280 || cfg.Height != 640 {
		t.Errorf("sent %s %dx%d (%v), want a 1280x640 JPEG", im.MIME, cfg.Width, cfg.Height, err)
	}
}

func TestModelWithoutVision(t *testing.T) {
	rejected := &agent.Error{Code: agent.ErrUnsupported, Message: "the model x does not take images (HTTP 400)"}
	ag := &fakeAgent{imagesErr: rejected}
	h := newPhotoHarness(t, ag, VisionAuto, pngOf(t, 10, 10))
	h.handle(t, photo("Add these to Groceries", "p1"))
	h.idle(t)
	if got := h.plat.last().Text; !strings.Contains(got, "Pick a vision model") {
		t.Errorf("answer %q, want a plain hint to pick a vision model", got)
	}
	// On auto, the next photo is answered at once, without a download.
	n := h.plat.downloads
	h.handle(t, photo("", "p2"))
	h.idle(t)
	if got := h.plat.last().Text; !strings.Contains(got, "Pick a vision model") || h.plat.downloads != n {
		t.Errorf("second photo: %q, %d downloads", got, h.plat.downloads-n)
	}
	if len(ag.startedList()) != 1 {
		t.Errorf("runs: %q", ag.startedList())
	}
}

func TestVisionOff(t *testing.T) {
	ag := &fakeAgent{}
	h := newPhotoHarness(t, ag, VisionOff, pngOf(t, 10, 10))
	h.handle(t, photo("", "p1"))
	h.handle(t, photo("what's due today?", "p2"))
	h.idle(t)
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if joined(ag.started) != "what's due today?" || len(ag.images[0]) != 0 || h.plat.downloads != 0 {
		t.Errorf("runs %q with %d images, %d downloads; want the caption alone", ag.started, len(ag.images[0]), h.plat.downloads)
	}
	if texts := h.plat.texts(); !strings.Contains(texts[0], "TIDYBOT_VISION=off") {
		t.Errorf("sent %q, want the photo refused", texts)
	}
}

// TestPhotoWhileAQuestionWaits: a photo starts a new request; it is not
// taken as the answer to the pending question.
func TestPhotoWhileAQuestionWaits(t *testing.T) {
	ag := &fakeAgent{ask: []string{"Home", "Work"}}
	h := newPhotoHarness(t, ag, "", pngOf(t, 10, 10))
	h.handle(t, msg("file the dentist task", "m1"))
	h.idle(t)
	h.handle(t, photo("", "p1"))
	h.idle(t)
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if len(ag.resumed) != 0 || len(ag.started) != 2 || len(ag.images[1]) != 1 {
		t.Errorf("resumed %q, started %q; want the photo to start a run of its own", ag.resumed, ag.started)
	}
}

// TestPhotoRunResumedBeforeItsFirstStep: a restart before the first step
// was saved fetches the photo again, so the model still sees it.
func TestPhotoRunResumedBeforeItsFirstStep(t *testing.T) {
	st := newMemStore()
	a := &Attachment{Kind: AttachImage, Ref: "p1", Name: "photo.jpg"}
	st.threads["telegram:c1:"] = Thread{Key: "telegram:c1:", Platform: "telegram", ChatID: "c1"}
	st.runs["r1"] = &Run{ID: "r1", ThreadKey: "telegram:c1:", Platform: "telegram", ChatID: "c1", UserID: "42", Status: RunWorking,
		Instruction: "Add these to Groceries", Photo: a}
	ag := &fakeAgent{}
	file := pngOf(t, 20, 20)
	p := &fakePlatform{name: "telegram", download: func(Attachment, int64) ([]byte, error) { return file, nil }}
	b := New(st, ag, Config{AllowedUsers: []string{"telegram:42"}})
	b.AddPlatform(p)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if joined(ag.started) != "Add these to Groceries" || len(ag.images[0]) != 1 || !bytes.Equal(ag.images[0][0].Data, file) {
		t.Errorf("resumed run: %q with %d images, want the photo again", ag.started, len(ag.images))
	}
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
			_, err := fitImage(t.Context(), tt.data)
			var big *tooLargeError
			if !errors.As(err, &big) || big.w != tt.w || big.h != tt.h {
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
	im, err := fitImage(t.Context(), buf.Bytes())
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
				_, _ = fitImage(b.Context(), c.data)
			}
		})
	}
}
