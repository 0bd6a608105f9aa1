package agent

import (
	"fmt"
	"strings"
)

// ModelTier is one model a person may choose with /settings model: a
// short name ("fast", "best") and the model it asks (TIDYBOT_MODELS).
type ModelTier struct {
	Name  string
	Model string
}

// ParseModelTiers reads TIDYBOT_MODELS, "name:model,name:model,…" (e.g.
// "fast:gpt-6-luna,best:gpt-6.1-sol"); the first tier is the
// default. Empty: no tiers (no choice offered). A choice needs two or
// more tiers with distinct names and models; a name is a lowercase word
// (a-z, 0-9, -), never "default" (which /settings model uses to go back
// to the first).
func ParseModelTiers(s string) ([]ModelTier, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var tiers []ModelTier
	names, models := map[string]bool{}, map[string]string{}
	for i, part := range strings.Split(s, ",") {
		name, model, ok := strings.Cut(strings.TrimSpace(part), ":")
		name, model = strings.TrimSpace(name), strings.TrimSpace(model)
		switch {
		case strings.TrimSpace(part) == "":
			return nil, fmt.Errorf("tier %d is empty: write name:model pairs separated by commas, e.g. fast:gpt-6-luna,best:gpt-6.1-sol", i+1)
		case !ok || name == "" || model == "":
			return nil, fmt.Errorf("tier %q is not name:model (e.g. best:gpt-6.1-sol)", strings.TrimSpace(part))
		case !tierName(name):
			return nil, fmt.Errorf("tier name %q: use a short lowercase word (a-z, 0-9, -), such as fast or best", name)
		case name == "default":
			return nil, fmt.Errorf("tier name %q is taken: /settings model default goes back to the first tier", name)
		case strings.ContainsAny(model, " \t"):
			return nil, fmt.Errorf("tier %s: model %q has a space", name, model)
		case names[name]:
			return nil, fmt.Errorf("tier %s is named twice", name)
		case models[model] != "":
			return nil, fmt.Errorf("tiers %s and %s name the same model %s", models[model], name, model)
		}
		names[name], models[model] = true, name
		tiers = append(tiers, ModelTier{Name: name, Model: model})
	}
	if len(tiers) < 2 {
		return nil, fmt.Errorf("only one tier (%s): a choice needs two or more; for one model, set OPENAI_MODEL", tiers[0].Name)
	}
	return tiers, nil
}

func tierName(s string) bool {
	if len(s) > 20 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}
