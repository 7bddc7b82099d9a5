package replication

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/jackc/pglogrepl"
)

// insertMsg builds a pgoutput Insert: 'I' relid 'N' ncols cols...
func insertMsg(relid uint32, cols ...[]byte) []byte {
	b := []byte{'I'}
	b = binary.BigEndian.AppendUint32(b, relid)
	b = append(b, 'N')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for _, c := range cols {
		switch {
		case c == nil:
			b = append(b, 'n')
		case string(c) == "\x00toast":
			b = append(b, 'u')
		default:
			b = append(b, 't')
			b = binary.BigEndian.AppendUint32(b, uint32(len(c)))
			b = append(b, c...)
		}
	}
	return b
}

func beginMsg() []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, 0x16B3748)
	b = binary.BigEndian.AppendUint64(b, 786_000_000_123_456)
	return binary.BigEndian.AppendUint32(b, 4242)
}

func commitMsg() []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, 0x16B3748)
	b = binary.BigEndian.AppendUint64(b, 0x16B3778)
	return binary.BigEndian.AppendUint64(b, 786_000_000_123_456)
}

func TestDecoderMatchesPglogrepl(t *testing.T) {
	tests := []struct {
		name string
		msg  []byte
	}{
		{"begin", beginMsg()},
		{"commit", commitMsg()},
		{"insert", insertMsg(16384, []byte("7d0f2a9e-5d0b-4c39-9a57-3d2f1b8e7c41"), []byte("order"), nil, []byte(`{"a": [1, 2]}`), []byte(""))},
		{"insert with toast", insertMsg(1, []byte("x"), []byte("\x00toast"))},
	}
	var d decoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := pglogrepl.Parse(tt.msg)
			if err != nil {
				t.Fatalf("pglogrepl.Parse: %v", err)
			}
			got, err := d.decode(tt.msg)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if ins, ok := want.(*pglogrepl.InsertMessage); ok {
				// pglogrepl leaves Data nil for empty text; compare content.
				g := got.(*pglogrepl.InsertMessage)
				if g.RelationID != ins.RelationID || len(g.Tuple.Columns) != len(ins.Tuple.Columns) {
					t.Fatalf("got %+v, want %+v", g, ins)
				}
				for i, c := range ins.Tuple.Columns {
					gc := g.Tuple.Columns[i]
					if gc.DataType != c.DataType || gc.Length != c.Length || string(gc.Data) != string(c.Data) {
						t.Errorf("column %d: got %+v, want %+v", i, gc, c)
					}
				}
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

// Every truncation of a valid Insert is an error, never a panic or a
// read past the end.
func TestDecoderRejectsTruncatedInsert(t *testing.T) {
	full := insertMsg(9, []byte("id"), nil, []byte("payload"))
	var d decoder
	for n := 1; n < len(full); n++ {
		if _, err := d.decode(full[:n]); err == nil {
			t.Errorf("decode of the first %d of %d bytes succeeded", n, len(full))
		}
	}
	if _, err := d.decode(full); err != nil {
		t.Fatalf("decode of the whole message: %v", err)
	}
}

// The decoder reuses its structs: decoding allocates nothing.
func TestDecoderDoesNotAllocate(t *testing.T) {
	msgs := [][]byte{beginMsg(), insertMsg(1, []byte("a"), []byte("b"), []byte("c")), commitMsg()}
	var d decoder
	allocs := testing.AllocsPerRun(1000, func() {
		for _, m := range msgs {
			if _, err := d.decode(m); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per transaction", allocs)
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add(beginMsg())
	f.Add(commitMsg())
	f.Add(insertMsg(1, []byte("x"), nil, []byte("\x00toast")))
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) > 0 && msg[0] != 'I' {
			return // only Insert has hand-written decoding
		}
		var d decoder
		_, _ = d.decode(msg)
	})
}
