package agent

import "testing"

// TestAnswerScannerPieceByPiece feeds replies one byte, then three
// bytes, at a time: the value grows to the same answer PartialString
// finds in the whole text, never anything else on the way.
func TestAnswerScannerPieceByPiece(t *testing.T) {
	for _, raw := range []string{
		`{"answer":"Line one\nLine \"two\" \ud83d\ude00 é end"}`,
		`{"thought":"x \"answer\": y","action":{"type":"final_answer","answer":"Filed."}}`,
		`{"answer":7,"note":"n","answer":"late"}`,
	} {
		want, _ := PartialString(raw, "answer")
		for _, size := range []int{1, 3} {
			sc := newAnswerScanner("answer")
			for i := 0; i < len(raw); i += size {
				sc.write(raw[i:min(i+size, len(raw))])
				if got := sc.value(); len(got) > len(want) || got != want[:len(got)] {
					t.Fatalf("%s in pieces of %d: got %q on the way to %q", raw, size, got, want)
				}
			}
			if got := sc.value(); got != want || want == "" {
				t.Errorf("%s in pieces of %d: got %q, want %q", raw, size, got, want)
			}
		}
	}
}
