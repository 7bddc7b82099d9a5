package conformance

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCatalog checks the catalog against the Java tests and the docs:
// every Java test method has exactly one case; every case is compared
// (run, or checked as a refused configuration) or names why not; every
// difference anchor exists in docs/debezium-conformance.md; and the
// placeholders were all resolved, so no two cases share rows or topics.
func TestCatalog(t *testing.T) {
	list, err := os.ReadFile("testdata/debezium-tests.txt")
	if err != nil {
		t.Fatal(err)
	}
	var java []string
	for _, l := range strings.Split(string(list), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			java = append(java, l)
		}
	}
	doc, err := os.ReadFile("../../docs/debezium-conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`<a id="([a-z0-9-]+)"></a>`).FindAllStringSubmatch(string(doc), -1) {
		anchors[m[1]] = true
	}

	cases := catalog()
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.Java] {
			t.Errorf("%s: two cases", c.Java)
		}
		seen[c.Java] = true
		if !slices.Contains(java, c.Java) {
			t.Errorf("%s: no such Java test in testdata/debezium-tests.txt", c.Java)
		}
		if c.Outcome == NotRun && len(c.Difference) == 0 {
			t.Errorf("%s: neither compared nor explained (set Outcome, or Difference to an anchor of docs/debezium-conformance.md)", c.Java)
		}
		if c.Outcome == Records && len(c.Want) == 0 {
			t.Errorf("%s: compared but expects no record", c.Java)
		}
		refs := slices.Clone(c.Difference)
		for _, a := range c.SettingDiff {
			refs = append(refs, a)
		}
		for _, w := range c.Want {
			if w.TSMillis == 0 && !slices.Contains(refs, "record-timestamp") {
				refs = append(refs, "record-timestamp") // implied: compared with the commit time
			}
			if !strings.HasPrefix(w.Topic, "outbox.event."+c.tag+".") {
				t.Errorf("%s: topic %s does not carry the case's tag %s", c.Java, w.Topic, c.tag)
			}
		}
		for _, a := range refs {
			if !anchors[a] {
				t.Errorf("%s: difference %q has no <a id=%q></a> in docs/debezium-conformance.md", c.Java, a, a)
			}
		}
		if c.Outcome == Records || c.Outcome == Stops {
			for i := range c.Steps {
				if s := c.stepSQL(i); strings.Contains(s, "{tag}") || strings.Contains(s, "{table}") {
					t.Errorf("%s: step %d unresolved (rows shared between cases?): %s", c.Java, i, s)
				}
			}
			for i, s := range c.Steps {
				if s.Insert != nil && s.Insert["aggregatetype"] != nil && !strings.HasPrefix(s.Insert["aggregatetype"].(string), c.tag+".") {
					t.Errorf("%s: step %d routes to %v, not under the case's tag (rows shared between cases?)", c.Java, i, s.Insert["aggregatetype"])
				}
			}
		}
	}
	for _, j := range java {
		if !seen[j] {
			t.Errorf("Java test %s has no case", j)
		}
	}
}
