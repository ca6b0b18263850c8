package main

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
)

// ciCommand is one crashmatrix command line of a CI template.
type ciCommand struct {
	job  string
	args []string // after "crashmatrix": the subcommand, then its flags and arguments
}

var (
	ciCrashmatrix = regexp.MustCompile(`cmd/crashmatrix(@\S+)?\s+(.*)`)
	// A CI expression or variable stands for a value ("0" is a valid
	// one for every flag the templates set from one).
	ciVariable = regexp.MustCompile(`\$\{\{[^}]*\}\}|\$\(\([^)]*\)\)|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
)

// ciCommands returns every crashmatrix command line in a template, by job.
func ciCommands(t *testing.T, file string) (map[string]any, []ciCommand) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rootDir(), file))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	jobs := doc
	if j, ok := doc["jobs"].(map[string]any); ok {
		jobs = j
	}
	var out []ciCommand
	var walk func(job string, v any)
	walk = func(job string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				walk(job, x)
			}
		case []any:
			for _, x := range v {
				walk(job, x)
			}
		case string:
			if m := ciCrashmatrix.FindStringSubmatch(strings.Join(strings.Fields(v), " ")); m != nil {
				line := ciVariable.ReplaceAllString(m[2], "0")
				var args []string
				for _, a := range strings.Fields(line) {
					args = append(args, strings.Trim(a, `"'`))
				}
				out = append(out, ciCommand{job: job, args: args})
			}
		}
	}
	for name, j := range jobs {
		walk(name, j)
	}
	return jobs, out
}

// The CI templates run certify on shards and merge their reports once
// every shard has ended (failed or not), with flags these commands have.
func TestCITemplatesShardAndMerge(t *testing.T) {
	subcommands := map[string]func() *cobra.Command{"certify": certifyCmd, "merge": mergeCmd, "explore": exploreCmd}
	for _, tc := range []struct {
		file, always string
	}{{"ci/github-actions.yml", "if"}, {"ci/gitlab-ci.yml", "when"}} {
		jobs, cmds := ciCommands(t, tc.file)
		var shardOut, mergeIn []string
		mergeJob := ""
		for _, c := range cmds {
			mk, ok := subcommands[c.args[0]]
			if !ok {
				t.Errorf("%s job %s: crashmatrix %s: no such subcommand", tc.file, c.job, c.args[0])
				continue
			}
			cmd := mk()
			if err := cmd.ParseFlags(c.args[1:]); err != nil {
				t.Errorf("%s job %s: crashmatrix %s: %v", tc.file, c.job, strings.Join(c.args, " "), err)
				continue
			}
			switch c.args[0] {
			case "certify":
				shard, _ := cmd.Flags().GetString("shard")
				js, _ := cmd.Flags().GetString("json")
				if shard == "" || js == "" {
					t.Errorf("%s job %s: certify without --shard and --json: %v", tc.file, c.job, c.args)
				}
				shardOut = append(shardOut, js)
			case "merge":
				mergeJob, mergeIn = c.job, cmd.Flags().Args()
				if j, _ := cmd.Flags().GetString("junit"); j == "" {
					t.Errorf("%s: merge writes no JUnit report", tc.file)
				}
			}
		}
		if len(shardOut) == 0 || mergeJob == "" {
			t.Fatalf("%s: want a certify --shard job and a merge job, found %v", tc.file, cmds)
		}
		for _, out := range shardOut {
			matched := false
			for _, in := range mergeIn {
				if ok, _ := path.Match(path.Base(in), path.Base(out)); ok {
					matched = true
				}
			}
			if !matched {
				t.Errorf("%s: merge %v does not read the shard report %s", tc.file, mergeIn, out)
			}
		}
		job, _ := jobs[mergeJob].(map[string]any)
		if v, _ := job[tc.always].(string); !strings.Contains(v, "always") {
			t.Errorf("%s: the merge job does not run when a shard failed (%s: %q)", tc.file, tc.always, v)
		}
	}
}
