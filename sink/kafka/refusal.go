package kafka

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// refusals remembers which broker last refused a connection (kgo's
// HookBrokerConnect sees each connection's dial, TLS handshake and SASL
// exchange), so that an error of the sink names the broker that refused,
// not only the seeds.
type refusals struct {
	mu   sync.Mutex
	addr string // "" once that broker accepted a connection again
}

var _ kgo.HookBrokerConnect = (*refusals)(nil)

// OnBrokerConnect records a failed connection's broker.
func (r *refusals) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		r.addr = addr
	case r.addr == addr:
		r.addr = ""
	}
}

func (r *refusals) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
}

// explainRefusal says, for an error of authentication or TLS, which
// broker refused and what to change in the sink's block; "" for any other
// error. It never shows the password.
func (s *Sink) explainRefusal(err error) string {
	broker := s.refused.last()
	if broker == "" {
		broker = strings.Join(s.cfg.Brokers, ",")
	}
	switch {
	case s.cfg.SASL != nil && errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Sprintf("the broker at %s refused SASL %s as user %q: check sasl.user and sasl.password (and that the cluster has this user for %s)",
			broker, s.cfg.SASL.Mechanism, s.cfg.SASL.User, s.cfg.SASL.Mechanism)
	case s.cfg.SASL != nil && errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Sprintf("the broker at %s does not offer SASL %s: set sasl.mechanism to one its listener enables (sasl.enabled.mechanisms)", broker, s.cfg.SASL.Mechanism)
	case s.cfg.TLS != nil:
		if hint := s.cfg.TLS.Hint("tls.", err); hint != "" {
			return "the broker at " + broker + ": " + hint
		}
	}
	return ""
}
