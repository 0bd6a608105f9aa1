package bot

import (
	"fmt"
	"strings"

	"github.com/tidybot/tidybot/agent"
)

// tierModel is the model a run of ps's person asks: their tier's
// (Config.ModelTiers), the first when they chose none or a tier the
// owner no longer offers; "" without tiers (the model's own default).
func (b *Bot) tierModel(ps PersonSettings) string {
	t, _ := b.tier(ps)
	return t.Model
}

// tier is ps's person's tier as tierModel says; false without tiers.
func (b *Bot) tier(ps PersonSettings) (agent.ModelTier, bool) {
	tiers := b.cfg.ModelTiers
	if len(tiers) == 0 {
		return agent.ModelTier{}, false
	}
	for _, t := range tiers {
		if t.Name == ps.ModelTier {
			return t, true
		}
	}
	return tiers[0], true
}

// tierNames lists the tiers: "fast, best".
func (b *Bot) tierNames() string {
	names := make([]string, len(b.cfg.ModelTiers))
	for i, t := range b.cfg.ModelTiers {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// changeModel applies "/settings model VALUE" to ps: a tier's name, or
// default (the first tier).
func (b *Bot) changeModel(ps *PersonSettings, value string) (said, bad string) {
	tiers := b.cfg.ModelTiers
	if len(tiers) == 0 {
		return "", "The owner of this bot offers no choice of model: every request uses the same one."
	}
	lower := strings.ToLower(strings.TrimSpace(value))
	if lower == "default" || lower == "reset" {
		ps.ModelTier = ""
		return fmt.Sprintf("Model: the default, %s (%s).", tiers[0].Name, tiers[0].Model), ""
	}
	for _, t := range tiers {
		if t.Name == lower {
			ps.ModelTier = t.Name
			if t.Name == tiers[0].Name {
				ps.ModelTier = "" // the default: it follows the owner's order
			}
			return fmt.Sprintf("Model: %s (%s) from your next request.", t.Name, t.Model), ""
		}
	}
	return "", fmt.Sprintf("The model is one of %s, or default; not %q.", b.tierNames(), value)
}

// modelLine is the model row of /settings, with how to change it; ""
// without tiers.
func (b *Bot) modelLine(ps PersonSettings, cmd string) (row, usage string) {
	v, ok := b.modelValue(ps)
	if !ok {
		return "", ""
	}
	return "• Model: " + v + "\n", fmt.Sprintf("\n%s model %s|default", cmd, strings.ReplaceAll(b.tierNames(), ", ", "|"))
}

// modelValue says ps's person's tier in words; false without tiers.
func (b *Bot) modelValue(ps PersonSettings) (string, bool) {
	t, ok := b.tier(ps)
	if !ok {
		return "", false
	}
	if ps.ModelTier == "" {
		return fmt.Sprintf("%s (%s), the default", t.Name, t.Model), true
	}
	return fmt.Sprintf("%s (%s)", t.Name, t.Model), true
}

// modelButtons offer the tiers ps's person is not on; none without
// tiers.
func (b *Bot) modelButtons(ps PersonSettings) []Button {
	current := b.tierModel(ps)
	var bs []Button
	for _, t := range b.cfg.ModelTiers {
		if t.Model != current {
			bs = append(bs, Button{Label: "Model: " + t.Name, Data: settingData("model", t.Name), Command: "settings"})
		}
	}
	return bs
}
