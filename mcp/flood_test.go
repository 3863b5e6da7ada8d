package mcp

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// floodSource is a ready tool source whose listing, once armed, waits for
// release: a server slow to list its tools while it says, over and over,
// that they changed.
type floodSource struct {
	armed   atomic.Bool
	entered chan struct{} // a value each time a listing begins, once armed
	release chan struct{}

	mu       sync.Mutex
	watchers []func()
}

func (f *floodSource) Name() string { return "flood" }
func (f *floodSource) Start()       {}
func (f *floodSource) Status() codecell.SourceStatus {
	return codecell.SourceStatus{Name: "flood", State: codecell.SourceReady}
}

func (f *floodSource) Watch(fn func()) (stop func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchers = append(f.watchers, fn)
	return func() {}
}

func (f *floodSource) changed() {
	f.mu.Lock()
	ws := append([]func(){}, f.watchers...)
	f.mu.Unlock()
	for _, w := range ws {
		w()
	}
}

func (f *floodSource) Tools(ctx context.Context) ([]codecell.Tool, error) {
	if f.armed.Load() {
		f.entered <- struct{}{}
		<-f.release
	}
	return []codecell.Tool{{Name: "x", Description: "A tool.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Call: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }}}, nil
}

// An upstream server that says its tools changed in a flood costs one
// description of execute at a time, and one more for the changes that came
// during it: not a goroutine per change waiting its turn.
func TestToolChangesInAFloodAreCoalesced(t *testing.T) {
	const changes = 10000
	src := &floodSource{entered: make(chan struct{}, changes+1), release: make(chan struct{})}
	box := &codecell.Toolbox{}
	if err := box.AddSource(src); err != nil {
		t.Fatal(err)
	}
	s := &Server{Engine: &codecell.Engine{Tier: "local", Tools: box}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.SDKServer(ctx)

	src.armed.Store(true)
	src.changed()
	<-src.entered // a description is under way, and waits for the listing
	before := runtime.NumGoroutine()
	for range changes {
		src.changed()
	}
	grew := runtime.NumGoroutine() - before
	close(src.release)
	t.Logf("%d changes during a description left %d more goroutines", changes, grew)
	if grew > changes/100 {
		t.Errorf("%d changes during a description left %d more goroutines, want at most %d", changes, grew, changes/100)
	}
	// The changes that came during the first description are described.
	select {
	case <-src.entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the changes made during a description were never described")
	}
}
