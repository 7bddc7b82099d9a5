package outbox

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// newUUIDv7 returns a UUID version 7 (RFC 9562 section 5.7) in its
// canonical text form: 48 bits of Unix milliseconds, the version, 74
// random bits and the variant. crypto/rand's Read never fails (Go 1.24+).
func newUUIDv7(now time.Time) string {
	var u [16]byte
	_, _ = rand.Read(u[6:])
	ms := uint64(now.UnixMilli())
	u[0], u[1], u[2] = byte(ms>>40), byte(ms>>32), byte(ms>>24)
	u[3], u[4], u[5] = byte(ms>>16), byte(ms>>8), byte(ms)
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
