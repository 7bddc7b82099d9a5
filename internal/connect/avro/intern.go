package avro

import (
	"sync"

	"github.com/walrelay/walrelay/internal/connect"
)

// DefaultInternerSize is the number of schemas an Interner made with
// NewInterner(0) holds.
const DefaultInternerSize = 4096

// Interner hands out one *Schema per distinct schema text, so that the
// relay, which caches the registry's id per pointer, asks the registry
// once per schema. It is safe for concurrent use. It holds at most its
// size: when full it starts again empty, so a schema seen before may then
// come back as a new pointer (one more registry lookup, never a wrong id:
// the text behind a pointer never changes).
type Interner struct {
	mu  sync.Mutex
	max int
	m   map[string]*Schema
}

// NewInterner returns an Interner holding at most size schemas
// (DefaultInternerSize when size <= 0).
func NewInterner(size int) *Interner {
	if size <= 0 {
		size = DefaultInternerSize
	}
	return &Interner{max: size, m: make(map[string]*Schema)}
}

// Intern returns the Schema interned for s's text, s itself the first
// time.
func (in *Interner) Intern(s *Schema) *Schema {
	in.mu.Lock()
	defer in.mu.Unlock()
	if t, ok := in.m[s.text]; ok {
		return t
	}
	if len(in.m) >= in.max {
		clear(in.m)
	}
	in.m[s.text] = s
	return s
}

// FromConnectSchema is FromConnectSchema followed by Intern.
func (in *Interner) FromConnectSchema(s *connect.Schema, o Options) (*Schema, error) {
	as, err := FromConnectSchema(s, o)
	if err != nil {
		return nil, err
	}
	return in.Intern(as), nil
}

// Len returns the number of schemas the Interner holds.
func (in *Interner) Len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.m)
}
