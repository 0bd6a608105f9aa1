package store

import (
	"reflect"
	"testing"

	"github.com/tidybot/tidybot/bot"
)

// TestMessageRecordHoldsEveryMessageField: RecentMessages decodes a
// stored bot.Message into messageRecord, which leaves out only the
// thread key (the bucket's name). A field added to bot.Message and not
// to messageRecord would be stored and then silently dropped on every
// read; this fails first.
func TestMessageRecordHoldsEveryMessageField(t *testing.T) {
	rec := reflect.TypeFor[messageRecord]()
	msg := reflect.TypeFor[bot.Message]()
	for i := range msg.NumField() {
		f := msg.Field(i)
		if f.Name == "ThreadKey" {
			continue // the bucket's name
		}
		g, ok := rec.FieldByName(f.Name)
		if !ok || g.Type != f.Type || g.Tag.Get("json") != f.Tag.Get("json") {
			t.Errorf("bot.Message.%s (%s, json %q) is not read back by RecentMessages: add it to messageRecord and to the bot.Message RecentMessages builds", f.Name, f.Type, f.Tag.Get("json"))
		}
	}
	if rec.NumField() != msg.NumField()-1 {
		t.Errorf("messageRecord has %d fields, bot.Message %d besides its thread key", rec.NumField(), msg.NumField()-1)
	}
}
