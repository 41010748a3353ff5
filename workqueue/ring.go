package workqueue

// ring is a FIFO of T in a power-of-two circular buffer. Unlike an
// append-and-reslice slice it reuses its storage, so a queue in steady state
// allocates nothing, and it shrinks again after a burst.
type ring[T any] struct {
	buf  []T
	head int
	n    int
	// low counts the pops since the ring last held more than a quarter of
	// its capacity.
	low int
}

const (
	ringMinCap = 16
	// ringShrinkCap is the capacity above which a mostly empty ring gives
	// memory back; below it, keeping the buffer is cheaper than churning.
	ringShrinkCap = 1024
)

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(x T) {
	if r.n == len(r.buf) {
		r.resize(max(ringMinCap, 2*len(r.buf)))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = x
	r.n++
}

// pop removes and returns the oldest item; the ring must not be empty.
func (r *ring[T]) pop() T {
	var zero T
	x := r.buf[r.head]
	// Clear the slot so that the ring does not keep the item reachable.
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	// Shrink only after a whole buffer's worth of pops has kept the ring
	// under a quarter full: a queue that empties and fills again over and
	// over would otherwise reallocate its buffer on every cycle.
	if len(r.buf) > ringShrinkCap && r.n < len(r.buf)/4 {
		r.low++
		if r.low >= len(r.buf) {
			r.resize(len(r.buf) / 2)
		}
	} else {
		r.low = 0
	}
	return x
}

// reset drops every item and the buffer.
func (r *ring[T]) reset() {
	*r = ring[T]{}
}

func (r *ring[T]) resize(size int) {
	buf := make([]T, size)
	if r.n > 0 {
		end := r.head + r.n
		if end <= len(r.buf) {
			copy(buf, r.buf[r.head:end])
		} else {
			k := copy(buf, r.buf[r.head:])
			copy(buf[k:], r.buf[:end-len(r.buf)])
		}
	}
	r.buf = buf
	r.head = 0
	r.low = 0
}
