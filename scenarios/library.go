package scenarios

import (
	"embed"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

//go:embed library/*.yaml
var library embed.FS

// Library loads the scenario library embedded in the binary (the files of
// scenarios/library at build time).
func Library() ([]*Scenario, error) {
	return loadFS(library, "library", "scenarios/library")
}

// StandardDocuments names the texts of the standard corpus (sim.DocD1v1
// and the rest) as the library's documents sections do.
var StandardDocuments = map[string]string{
	"d1v1": catalogue.DocD1v1,
	"d1v2": catalogue.DocD1v2,
	"d2":   catalogue.DocD2,
	"d3a":  catalogue.DocD3a,
	"d3b":  catalogue.DocD3b,
	"d4":   catalogue.DocD4,
}

// FromCase turns a simulator case into a scenario (the explorer writes
// shrunk cases this way): contents become documents (the standard corpus
// under its names, others after their documentId), arms become faults.
// The caller sets Expect and the run settings before Marshal.
func FromCase(c catalogue.Case) (*Scenario, error) {
	// A scenario's name is lower-case letters, digits and '-'
	// ("durable-step-ops.create-1-of-2" becomes
	// "durable-step-ops-create-1-of-2").
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(c.ID))
	s := &Scenario{Name: name, Description: c.Description, System: c.System, Initial: c.Initial}
	if s.System == "" {
		s.System = faults.Ingestion
	}
	byContent := map[string]string{}
	for name, text := range StandardDocuments {
		byContent[text] = name
	}
	docName := func(a catalogue.Action) string {
		if n, ok := byContent[a.Content]; ok {
			if s.Documents == nil {
				s.Documents = map[string]string{}
			}
			s.Documents[n] = a.Content
			return n
		}
		base := a.Doc
		if base == "" {
			base = "doc"
		}
		n := base
		for i := 2; ; i++ {
			if _, used := s.Documents[n]; !used {
				break
			}
			n = fmt.Sprintf("%s-%d", base, i)
		}
		if s.Documents == nil {
			s.Documents = map[string]string{}
		}
		s.Documents[n] = a.Content
		byContent[a.Content] = n
		return n
	}
	for _, st := range c.Steps {
		out := Step{Worker: st.Worker, Background: st.Background, ContinueOnError: st.ContinueOnError, Resubmit: slices.Clone(st.Resubmit)}
		for _, a := range st.Actions {
			x := Action{Do: a.Do, Doc: a.Doc, Op: a.Op, Rounds: a.Rounds, Thread: a.Thread, Owner: a.Owner, Question: a.Question, Minutes: a.Minutes, Approve: a.Approve}
			if a.Do == "ingest" {
				x.Document = docName(a)
			}
			if x.Do == "recover" && x.Rounds == 0 {
				x.Rounds = DefaultRounds
			}
			out.Actions = append(out.Actions, x)
		}
		points := make([]faults.Point, 0, len(st.Arms))
		for p := range st.Arms {
			points = append(points, p)
		}
		sort.Slice(points, func(i, j int) bool { return catalogueIndex(points[i]) < catalogueIndex(points[j]) })
		for _, p := range points {
			act := st.Arms[p]
			out.Faults = append(out.Faults, Fault{Point: p, Kind: act.Kind, Hit: act.Hit, Pause: act.PauseFor, Server: act.Server, Tear: act.Tear})
		}
		if k := st.Durable; k != nil {
			if k.Hit < 1 || k.Method == "" {
				// Counted by store call number only: that moves when
				// calls without a durable step come and go.
				return nil, fmt.Errorf("case %s: its kill after %s names no store method and its call of that method (DurableKill.Method, Hit)", c.ID, catalogue.DurableStepName(*k))
			}
			kind, tear := faults.Crash, 0
			switch {
			case k.Power && k.Tear > 0:
				kind, tear = faults.TornWrite, faults.ActionTear(k.Tear)
			case k.Power:
				kind = faults.PowerLoss
			}
			out.Faults = append(out.Faults, Fault{Point: catalogue.DurableStepPoint, Kind: kind, Hit: k.Hit, Call: k.Method, Step: k.Step, Of: k.Steps, Syscall: k.Op, Server: k.Server, Tear: tear})
		}
		if st.Kill != nil {
			k := *st.Kill
			out.Kill = &k
		}
		if st.Meanwhile != nil {
			m := *st.Meanwhile
			out.Meanwhile = &m
		}
		if !slices.Equal(st.ExpectHit, out.ExpectedHits()) {
			out.ExpectHit = append([]faults.Point{}, st.ExpectHit...)
		}
		s.Steps = append(s.Steps, out)
	}
	return s, nil
}

func catalogueIndex(p faults.Point) int {
	for i, s := range faults.Catalogue {
		if s.Point == p {
			return i
		}
	}
	return len(faults.Catalogue)
}
