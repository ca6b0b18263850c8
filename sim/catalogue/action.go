package catalogue

// Action is one thing a worker does.
type Action struct {
	// Do is one of: ingest, retract, resume, recover, plansave-start,
	// plansave-invoke, plansave-conflict.
	Do      string `json:"do" yaml:"do"`
	Doc     string `json:"doc,omitempty" yaml:"doc,omitempty"`
	Content string `json:"content,omitempty" yaml:"content,omitempty"`
	// Op is the operationId of an ingest (derived when empty) or resume.
	Op string `json:"op,omitempty" yaml:"op,omitempty"`
	// Rounds bounds a recover action (default 10).
	Rounds   int    `json:"rounds,omitempty" yaml:"rounds,omitempty"`
	Thread   string `json:"thread,omitempty" yaml:"thread,omitempty"`
	Owner    string `json:"owner,omitempty" yaml:"owner,omitempty"`
	Question string `json:"question,omitempty" yaml:"question,omitempty"`
	Minutes  int    `json:"minutes,omitempty" yaml:"minutes,omitempty"`
	Approve  bool   `json:"approve,omitempty" yaml:"approve,omitempty"`
}
