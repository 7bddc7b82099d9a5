package reconcile

import (
	"crypto/sha256"
	"encoding/hex"
)

// key is an event id held compactly: the 16 bytes of a UUID in its text
// form, or the first 16 bytes of the SHA-256 of any other id's bytes
// (whose text the holder keeps aside, to report it).
type key [16]byte

// keyOf returns id's key and whether id is a UUID's text, which the key
// alone gives back (see key.uuid).
func keyOf(id []byte) (key, bool) {
	var k key
	if parseUUID(&k, id) {
		return k, true
	}
	sum := sha256.Sum256(id)
	copy(k[:], sum[:16])
	return k, false
}

// parseUUID decodes a UUID's 36-character text (either case) into k.
func parseUUID(k *key, s []byte) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return false
		}
		k[j] = hi<<4 | lo
		i += 2
		j++
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// uuid is the canonical (lower-case) text of a UUID key.
func (k key) uuid() string {
	var b [36]byte
	hex.Encode(b[0:8], k[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], k[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], k[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], k[8:10])
	b[23] = '-'
	hex.Encode(b[24:], k[10:])
	return string(b[:])
}

// pass is the pass (of n) whose share of the ids k is in. The key's last
// 8 bytes are random in UUIDs of versions 4 and 7 and in hashes alike.
func (k key) pass(n int) int {
	if n <= 1 {
		return 0
	}
	var v uint64
	for _, b := range k[8:] {
		v = v<<8 | uint64(b)
	}
	return int(v % uint64(n))
}
