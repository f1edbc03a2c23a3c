package etcdenv

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a target, and
// can cut them to play a network partition.
//
// Cut closes every forwarded connection and from then on holds each new
// one silently: it is accepted but nothing is read, written or forwarded,
// and it is not closed. That is what a partition looks like from the
// client: no error, no reset, only silence, so the client notices through
// its own timeouts and nothing else. Restore forwards again and closes the
// held connections, so that clients redial at once rather than after their
// dial timeouts.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		cut    bool
		closed bool
		// live are the forwarded connections, both ends; held are the
		// ones accepted while cut.
		live map[net.Conn]struct{}
		held map[net.Conn]struct{}
	}
}

// NewProxy starts a proxy to target (host:port, or a URL such as
// http://127.0.0.1:2379) on a free port of 127.0.0.1, and stops it at the
// end of the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatalf("etcdenv: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// StartProxy is NewProxy for callers without a testing.TB; the caller
// must Close it.
func StartProxy(target string) (*Proxy, error) {
	if i := strings.Index(target, "://"); i >= 0 {
		target = target[i+3:]
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln}
	p.mu.live = map[net.Conn]struct{}{}
	p.mu.held = map[net.Conn]struct{}{}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, 127.0.0.1:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Endpoint is the proxy's address as a URL, http://127.0.0.1:PORT.
func (p *Proxy) Endpoint() string { return "http://" + p.Addr() }

// Cut closes every forwarded connection and holds new ones silently
// until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.cut = true
	for c := range p.mu.live {
		c.Close()
	}
}

// Restore forwards new connections again and closes the ones held while
// cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.cut = false
	for c := range p.mu.held {
		c.Close()
		delete(p.mu.held, c)
	}
}

// Close stops the proxy, closes every connection and waits for its
// goroutines. Calling it again does nothing.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	p.ln.Close()
	for c := range p.mu.live {
		c.Close()
	}
	for c := range p.mu.held {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		switch {
		case p.mu.closed:
			c.Close()
		case p.mu.cut:
			p.mu.held[c] = struct{}{}
		default:
			p.wg.Add(1)
			go p.forward(c)
		}
		p.mu.Unlock()
	}
}

// forward copies between c and a new connection to the target until
// either side ends or Cut or Close closes them.
func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.mu.cut || p.mu.closed {
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.mu.live[c] = struct{}{}
	p.mu.live[s] = struct{}{}
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done
	c.Close()
	s.Close()
	<-done
	p.mu.Lock()
	delete(p.mu.live, c)
	delete(p.mu.live, s)
	p.mu.Unlock()
}
