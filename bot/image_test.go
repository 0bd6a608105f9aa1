package bot

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
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

func newPhotoHarness(t *testing.T, ag *mockAgent, vision string, file []byte) *harness {
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
	ag := &mockAgent{}
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
	ag := &mockAgent{}
	h := newPhotoHarness(t, ag, "", pngOf(t, 1600, 800))
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

// TestPhotoOverThePixelBudgetIsAnswered: an image that declares more
// than media.MaxImagePixels is refused with its size, and no run starts.
func TestPhotoOverThePixelBudgetIsAnswered(t *testing.T) {
	bomb := pngOf(t, 1, 1) // its IHDR chunk made to declare 9000x9000
	binary.BigEndian.PutUint32(bomb[16:], 9000)
	binary.BigEndian.PutUint32(bomb[20:], 9000)
	binary.BigEndian.PutUint32(bomb[29:], crc32.ChecksumIEEE(bomb[12:29]))
	ag := &mockAgent{}
	h := newPhotoHarness(t, ag, "", bomb)
	h.handle(t, photo("Add these to Groceries", "p1"))
	h.idle(t)
	want := "Sorry, that image is too large for me to look at: 9000×9000 pixels (81 megapixels); I take up to 40 megapixels. Please send a smaller one."
	if got := h.plat.last().Text; got != want {
		t.Errorf("answered %q, want %q", got, want)
	}
	if got := ag.startedList(); len(got) != 0 {
		t.Errorf("runs started: %v", got)
	}
}

func TestModelWithoutVision(t *testing.T) {
	rejected := &agent.Error{Code: agent.ErrUnsupported, Message: "the model x does not take images (HTTP 400)"}
	ag := &mockAgent{StartFn: blind(rejected)}
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
	ag := &mockAgent{}
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
	ag := &mockAgent{StartFn: asking("Home", "Work")}
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
	ag := &mockAgent{}
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
