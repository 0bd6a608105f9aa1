package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schemas are generated from the action structs, never written by hand:
//   - the loose schema validates replies: an optional argument may be
//     missing or null;
//   - the strict schema is what we send where a server enforces it, and
//     follows OpenAI's rules: additionalProperties false and every property
//     listed in required on every object, optional ones made nullable.

// reflectArgs returns the schema of an action's argument struct.
func reflectArgs(d actionDef, strict bool) *jsonschema.Schema {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.Reflect(d.New())
	s.Version = ""
	s.ID = ""
	prepare(s, strict)
	return s
}

// prepare makes optional properties nullable, and in strict mode lists
// every property as required, on every object in s.
func prepare(s *jsonschema.Schema, strict bool) {
	if s == nil {
		return
	}
	if s.Type == "object" && s.Properties == nil {
		s.Properties = jsonschema.NewProperties()
	}
	if s.Properties != nil {
		req := map[string]bool{}
		for _, r := range s.Required {
			req[r] = true
		}
		for p := s.Properties.Oldest(); p != nil; p = p.Next() {
			prepare(p.Value, strict)
			if !req[p.Key] {
				p.Value = nullable(p.Value)
				if strict {
					s.Required = append(s.Required, p.Key)
				}
			}
		}
		s.AdditionalProperties = jsonschema.FalseSchema
	}
	prepare(s.Items, strict)
	for _, a := range s.AnyOf {
		prepare(a, strict)
	}
}

// nullable wraps s so that it also accepts null.
func nullable(s *jsonschema.Schema) *jsonschema.Schema {
	inner := *s
	inner.Description = ""
	return &jsonschema.Schema{
		Description: s.Description,
		AnyOf:       []*jsonschema.Schema{&inner, {Type: "null"}},
	}
}

// schemaSet holds every generated schema and the compiled validators.
type schemaSet struct {
	loose  map[string]json.RawMessage
	strict map[string]json.RawMessage
	valid  map[string]*validator.Schema
	// parsed holds each loose schema decoded, for argument-name repair.
	parsed map[string]map[string]any
	// envelope is the strict json-protocol reply schema.
	envelope json.RawMessage
}

var (
	schemasOnce sync.Once
	schemas     *schemaSet
)

// getSchemas generates and compiles the schemas once. Generation cannot
// fail for the fixed action set; a failure is a programming error and
// panics at first use, which the schema tests catch.
func getSchemas() *schemaSet {
	schemasOnce.Do(func() {
		s, err := buildSchemas()
		if err != nil {
			panic(fmt.Sprintf("agent: action schemas: %v", err))
		}
		schemas = s
	})
	return schemas
}

func buildSchemas() (*schemaSet, error) {
	set := &schemaSet{
		loose:  map[string]json.RawMessage{},
		strict: map[string]json.RawMessage{},
		valid:  map[string]*validator.Schema{},
		parsed: map[string]map[string]any{},
	}
	c := validator.NewCompiler()
	var branches []*jsonschema.Schema
	for _, spec := range actionList {
		loose, err := json.Marshal(reflectArgs(spec, false))
		if err != nil {
			return nil, fmt.Errorf("marshal %s: %w", spec.Name, err)
		}
		strictSchema := reflectArgs(spec, true)
		strict, err := json.Marshal(strictSchema)
		if err != nil {
			return nil, fmt.Errorf("marshal strict %s: %w", spec.Name, err)
		}
		set.loose[spec.Name] = loose
		set.strict[spec.Name] = strict
		var parsed map[string]any
		if err := json.Unmarshal(loose, &parsed); err != nil {
			return nil, fmt.Errorf("parse %s: %w", spec.Name, err)
		}
		set.parsed[spec.Name] = parsed

		doc, err := validator.UnmarshalJSON(bytes.NewReader(loose))
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", spec.Name, err)
		}
		url := spec.Name + ".json"
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("add %s: %w", spec.Name, err)
		}
		v, err := c.Compile(url)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", spec.Name, err)
		}
		set.valid[spec.Name] = v

		// The json protocol's branch for this action: its arguments plus
		// "type" first.
		props := jsonschema.NewProperties()
		props.Set("type", &jsonschema.Schema{Type: "string", Enum: []any{spec.Name}})
		for p := strictSchema.Properties.Oldest(); p != nil; p = p.Next() {
			props.Set(p.Key, p.Value)
		}
		branches = append(branches, &jsonschema.Schema{
			Type:                 "object",
			Description:          spec.Description,
			Properties:           props,
			Required:             append([]string{"type"}, strictSchema.Required...),
			AdditionalProperties: jsonschema.FalseSchema,
		})
	}
	props := jsonschema.NewProperties()
	props.Set("thought", &jsonschema.Schema{Type: "string", Description: "Your reasoning for the next action, one or two sentences."})
	props.Set("action", &jsonschema.Schema{AnyOf: branches})
	env, err := json.Marshal(&jsonschema.Schema{
		Type:                 "object",
		Properties:           props,
		Required:             []string{"thought", "action"},
		AdditionalProperties: jsonschema.FalseSchema,
	})
	if err != nil {
		return nil, fmt.Errorf("marshal envelope: %w", err)
	}
	set.envelope = env
	return set, nil
}

// ActionSchema returns the JSON Schema of an action's arguments; strict
// selects the OpenAI-strict form.
func ActionSchema(name string, strict bool) (json.RawMessage, bool) {
	s := getSchemas()
	if strict {
		v, ok := s.strict[name]
		return v, ok
	}
	v, ok := s.loose[name]
	return v, ok
}

// EnvelopeSchema returns the strict schema of a json-protocol reply:
// {"thought": "...", "action": {"type": "<name>", ...}}.
func EnvelopeSchema() json.RawMessage { return getSchemas().envelope }

// tools returns the actions named in only as tools, or every action
// when only is empty, in actionList's order.
func tools(strict bool, only []string) []Tool {
	out := make([]Tool, 0, len(actionList))
	for _, spec := range actionList {
		if len(only) > 0 && !slices.Contains(only, spec.Name) {
			continue
		}
		schema, _ := ActionSchema(spec.Name, strict)
		out = append(out, Tool{Name: spec.Name, Description: spec.Description, Parameters: schema, Strict: strict})
	}
	return out
}

var printer = message.NewPrinter(language.English)

// validateArgs checks raw arguments against an action's schema and returns
// a short, model-readable description of every problem.
func validateArgs(name string, args any) error {
	v, ok := getSchemas().valid[name]
	if !ok {
		return fmt.Errorf("unknown action %q", name)
	}
	err := v.Validate(args)
	if err == nil {
		return nil
	}
	ve, ok := err.(*validator.ValidationError)
	if !ok {
		return err
	}
	var leaves []string
	collectLeaves(ve, &leaves)
	sort.Strings(leaves)
	leaves = dedupe(leaves)
	return fmt.Errorf("%s", strings.Join(leaves, "; "))
}

func collectLeaves(e *validator.ValidationError, out *[]string) {
	if len(e.Causes) == 0 {
		loc := "/" + strings.Join(e.InstanceLocation, "/")
		msg := e.ErrorKind.LocalizedString(printer)
		if loc == "/" {
			*out = append(*out, msg)
		} else {
			*out = append(*out, "at "+loc+": "+msg)
		}
		return
	}
	for _, c := range e.Causes {
		collectLeaves(c, out)
	}
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
