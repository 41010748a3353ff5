package client

import (
	"io"
	"runtime"
	"sync"

	"github.com/listwatch/listwatch/cache"
)

// frameDecoder is an eventDecoder whose reading splits in two: framing,
// which reads the stream and must go in order, and decoding a frame, most
// of the work, which several goroutines may do at once for different
// frames.
type frameDecoder[T cache.Object] interface {
	eventDecoder[T]
	// frame reads the next event's bytes into buf's storage, or into a
	// larger slice when they do not fit, and returns them; io.EOF only at
	// a clean end of stream.
	frame(buf []byte) ([]byte, error)
	// decodeFrame decodes what frame returned, keeping no reference to
	// it. It is safe for concurrent use.
	decodeFrame(frame []byte) (cache.Event[T], error)
}

// readAhead decodes the events of a stream in goroutines of their own, a
// few events ahead of the consumer, so that decoding, most of an
// informer's work, overlaps with the applying of the events before. A
// frameDecoder's frames are decoded by up to maxDecoders goroutines at once
// (one per CPU), and handed out in the stream's order. The buffers are
// small: a slow consumer still slows the stream down (TCP flow control)
// rather than growing them.
type readAhead[T cache.Object] struct {
	// outs are the decoders' results: the i-th event of the stream is in
	// outs[i%len(outs)], so taking them in turn keeps the stream's order.
	outs []chan aheadResult[T]
	turn int // the consumer's next outs
	stop chan struct{}
	wg   sync.WaitGroup
	free chan []byte // frame buffers to reuse
}

type aheadResult[T cache.Object] struct {
	ev  cache.Event[T]
	err error
}

// frameJob is a frame read for a decoder, or the error that ended reading.
type frameJob struct {
	frame []byte
	err   error
}

const (
	// readAheadEvents is how many decoded events may wait for the
	// consumer, in all.
	readAheadEvents = 16
	// maxDecoders caps the goroutines that decode one stream's frames.
	maxDecoders = 4
)

func startReadAhead[T cache.Object](dec eventDecoder[T]) *readAhead[T] {
	return startReadAheadN(dec, min(runtime.GOMAXPROCS(0), maxDecoders))
}

// startReadAheadN starts reading dec ahead with n decoders, one when dec
// is not a frameDecoder.
func startReadAheadN[T cache.Object](dec eventDecoder[T], n int) *readAhead[T] {
	fd, ok := dec.(frameDecoder[T])
	if !ok || n < 2 {
		a := &readAhead[T]{outs: []chan aheadResult[T]{make(chan aheadResult[T], readAheadEvents)}, stop: make(chan struct{})}
		a.wg.Go(func() { a.decode(dec) })
		return a
	}
	per := max(readAheadEvents/n, 1)
	a := &readAhead[T]{outs: make([]chan aheadResult[T], n), stop: make(chan struct{}), free: make(chan []byte, 2*readAheadEvents)}
	ins := make([]chan frameJob, n)
	for i := range n {
		ins[i] = make(chan frameJob, per)
		a.outs[i] = make(chan aheadResult[T], per)
		a.wg.Go(func() { a.decodeFrames(fd, ins[i], a.outs[i]) })
	}
	a.wg.Go(func() { a.readFrames(fd, ins) })
	return a
}

// decode reads and decodes the whole stream.
func (a *readAhead[T]) decode(dec eventDecoder[T]) {
	for {
		ev, err := dec.next()
		if !a.send(a.outs[0], aheadResult[T]{ev, err}) || err != nil {
			return
		}
	}
}

// readFrames reads the stream's frames and deals them to the decoders in
// turn, up to the first error, which goes to the decoder whose turn it is.
func (a *readAhead[T]) readFrames(fd frameDecoder[T], ins []chan frameJob) {
	for i := 0; ; i = (i + 1) % len(ins) {
		var buf []byte
		select {
		case buf = <-a.free:
		default:
		}
		frame, err := fd.frame(buf)
		select {
		case ins[i] <- frameJob{frame, err}:
		case <-a.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// decodeFrames decodes the frames of in, in order, into out.
func (a *readAhead[T]) decodeFrames(fd frameDecoder[T], in <-chan frameJob, out chan<- aheadResult[T]) {
	for {
		var job frameJob
		select {
		case job = <-in:
		case <-a.stop:
			return
		}
		r := aheadResult[T]{err: job.err}
		if r.err == nil {
			r.ev, r.err = fd.decodeFrame(job.frame)
		}
		if cap(job.frame) <= keepFrameBuf {
			select {
			case a.free <- job.frame:
			default:
			}
		}
		if !a.send(out, r) || r.err != nil {
			return
		}
	}
}

// send gives the consumer r, unless the stream is being closed.
func (a *readAhead[T]) send(out chan<- aheadResult[T], r aheadResult[T]) bool {
	select {
	case out <- r:
		return true
	case <-a.stop:
		return false
	}
}

// next returns the stream's next event. After an error, the stream is
// done: the consumer closes it rather than reading on.
func (a *readAhead[T]) next() (cache.Event[T], error) {
	select {
	case <-a.stop:
		return cache.Event[T]{}, io.EOF
	default:
	}
	select {
	case r := <-a.outs[a.turn]:
		a.turn = (a.turn + 1) % len(a.outs)
		return r.ev, r.err
	case <-a.stop:
		return cache.Event[T]{}, io.EOF
	}
}

// close stops the goroutines and waits for them; the stream's body must be
// closed first, so that a read one is blocked in returns.
func (a *readAhead[T]) close() {
	close(a.stop)
	a.wg.Wait()
}
