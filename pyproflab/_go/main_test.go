package main

import "testing"

func TestEveryCommandHasASummary(t *testing.T) {
	for name, c := range commands {
		if c.run == nil || c.summary == "" {
			t.Errorf("command %q: needs a run function and a summary", name)
		}
	}
}
