package kafka

import (
	"crypto/x509"
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
	var (
		unknownCA x509.UnknownAuthorityError
		badName   x509.HostnameError
		invalid   x509.CertificateInvalidError
		netErr    *net.OpError
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Sprintf("the broker at %s refused SASL %s as user %q: check sasl.user and sasl.password (and that the cluster has this user for %s)",
			broker, s.cfg.SASL.Mechanism, s.cfg.SASL.User, s.cfg.SASL.Mechanism)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Sprintf("the broker at %s does not offer SASL %s: set sasl.mechanism to one its listener enables (sasl.enabled.mechanisms)", broker, s.cfg.SASL.Mechanism)
	case errors.As(err, &unknownCA):
		if s.cfg.TLS != nil && s.cfg.TLS.CAFile != "" {
			return fmt.Sprintf("the certificate of the broker at %s is not signed by a CA in tls.ca_file %s: set tls.ca_file to the CA that signed the cluster's certificates (the service's CA bundle)", broker, s.cfg.TLS.CAFile)
		}
		return fmt.Sprintf("the certificate of the broker at %s is not signed by a CA this system trusts: set tls.ca_file to the CA that signed the cluster's certificates (the service's CA bundle)", broker)
	case errors.As(err, &badName):
		return fmt.Sprintf("the certificate of the broker at %s is not for the name dialled (%v): give brokers by a name the certificate holds", broker, badName.Error())
	case errors.As(err, &invalid):
		return fmt.Sprintf("the certificate of the broker at %s is not valid (%v)", broker, invalid.Error())
	case errors.As(err, &netErr) && netErr.Op == "remote error":
		// A TLS alert from the broker: most often the listener requires
		// a client certificate (ssl.client.auth=required) and got none,
		// or one signed by a CA it does not trust.
		if s.cfg.TLS == nil || s.cfg.TLS.CertFile == "" {
			return fmt.Sprintf("the broker at %s refused the TLS handshake: if its listener requires client certificates (ssl.client.auth=required), set tls.cert_file and tls.key_file", broker)
		}
		return fmt.Sprintf("the broker at %s refused the TLS handshake: is tls.cert_file %s signed by a CA that the broker trusts (its ssl.truststore)?", broker, s.cfg.TLS.CertFile)
	}
	return ""
}
