package faults

// crashSignal is the panic value of a crash simulated by PanicCrash.
type crashSignal struct{ hit Hit }

// PanicCrash returns a Runtime whose crashes unwind the running call with
// a panic instead of ending the process: a test can simulate a process
// death at a failpoint inside one process, then go on with fresh objects
// on the same stores (RunUntilCrash catches it).
func PanicCrash(in Injector) *Runtime {
	return &Runtime{Injector: in, Crash: func(h Hit) { panic(crashSignal{h}) }}
}

// RunUntilCrash runs f and returns the fault that crashed it under a
// PanicCrash runtime, or nil when f returned; any other panic goes on.
func RunUntilCrash(f func()) (hit *Hit) {
	defer func() {
		if r := recover(); r != nil {
			c, ok := r.(crashSignal)
			if !ok {
				panic(r)
			}
			hit = &c.hit
		}
	}()
	f()
	return nil
}
