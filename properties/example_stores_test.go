package properties_test

import (
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
)

// testStoresConform is the conformance test of a store: in your own
// package it is a TestXxx function of a _test.go file, and your store's
// constructor stands where sqlite.Open does. Each case gets a fresh bundle
// from the function it is given, here a new file in the case's t.TempDir().
func testStoresConform(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "store.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// The conformance suite of a store bundle: one subtest per interface
// (operation store, document states, entity registry, graph writer, lock
// provider), then concurrent clients checked for linearizability, then the
// optional methods compared with the reads they replace.
//
// The example is compiled, not run: properties.Stores needs the
// *testing.T of a test. TestExamplesRun (properties) runs testStoresConform.
func ExampleStores() {
	// In your package: func TestStoresConform(t *testing.T), with the body
	// of testStoresConform above; go test runs it.
}
