package checkpoint

// ring is a FIFO of *Tx on a power-of-two circular buffer.
type ring struct {
	buf  []*Tx
	head int
	n    int
}

func (r *ring) init(size int) { r.buf = make([]*Tx, size) }

func (r *ring) len() int { return r.n }

func (r *ring) front() *Tx {
	if r.n == 0 {
		return nil
	}
	return r.buf[r.head]
}

func (r *ring) back() *Tx { return r.buf[(r.head+r.n-1)&(len(r.buf)-1)] }

func (r *ring) push(tx *Tx) {
	if r.n == len(r.buf) {
		grown := make([]*Tx, 2*len(r.buf))
		for i := 0; i < r.n; i++ {
			grown[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = grown, 0
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = tx
	r.n++
}

func (r *ring) pop() {
	r.buf[r.head] = nil
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
}
