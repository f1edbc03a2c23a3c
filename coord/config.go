package coord

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-cdc/sluice/internal/confdef"
	"github.com/sluice-cdc/sluice/tlsconfig"
)

// Defaults of Config.
const (
	DefaultPrefix      = "/sluice/"
	DefaultLeaseTTL    = 10 * time.Second
	DefaultDialTimeout = 5 * time.Second
	// MinLeaseTTL is the shortest lease_ttl: etcd grants nothing shorter
	// than 1.5 times its election timeout (1s by default), in whole
	// seconds.
	MinLeaseTTL = 2 * time.Second
)

// Config says how to reach etcd and how long a leader may go unheard
// before another replica takes over. The zero value of every field but
// Endpoints means its default. The tags besides yaml are the etcd block's
// definition (package internal/confdef): each key's default, which
// withDefaults applies and docs/CONFIG.md is checked against; the
// Default* constants are the same values for Go callers.
type Config struct {
	// Endpoints are the etcd members' client URLs (required), e.g.
	// http://10.0.0.1:2379, or https://... with tls. A bare host:port
	// uses TLS when tls is set.
	Endpoints []string `yaml:"endpoints"`
	// Prefix starts every key sluice writes: the leader election of a
	// pipeline is under PREFIX<pipeline>/leader/, its checkpoint at
	// PREFIX<pipeline>/checkpoint. Default "/sluice/"; a missing final
	// "/" is added.
	Prefix string `yaml:"prefix" default:"/sluice/"`
	// LeaseTTL is how long etcd keeps a replica's leadership after last
	// hearing from it: a leader that crashes or is cut off is replaced
	// after about this long. The leader itself stops after 2/3 of it
	// without an answer from etcd. A whole number of seconds, at least
	// 2s. Default 10s.
	LeaseTTL time.Duration `yaml:"lease_ttl" default:"10s"`
	// DialTimeout bounds connecting to etcd at start. Default 5s.
	DialTimeout time.Duration `yaml:"dial_timeout" default:"5s"`
	// TLS verifies the members against CAFile and, with CertFile and
	// KeyFile, authenticates this replica. Setting any of them turns TLS
	// on.
	TLS TLSConfig `yaml:"tls"`
	// Username and Password authenticate with etcd's own users.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// ID names this replica in the election and in `sluice status`.
	// Default HOSTNAME:PID.
	ID string `yaml:"id" computed:"hostname:pid"`
}

// TLSConfig is the tls block of Config, the one every client takes
// (tlsconfig.Config).
type TLSConfig = tlsconfig.Config

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	confdef.ApplyDefaults(&c) // the static ones, from the default tags
	if !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	if c.ID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		c.ID = host + ":" + strconv.Itoa(os.Getpid())
	}
	return c
}

// Validate names the field that is wrong and says what would be right.
// Zero values are fine (they mean the defaults), except for Endpoints.
func (c *Config) Validate() error {
	if len(c.Endpoints) == 0 {
		return errors.New("endpoints is required: the etcd members to coordinate through, e.g. endpoints: [http://127.0.0.1:2379]")
	}
	for _, ep := range c.Endpoints {
		if err := checkEndpoint(ep, c.TLS.Set()); err != nil {
			return fmt.Errorf("endpoints: %q %w", ep, err)
		}
	}
	if strings.ContainsAny(c.Prefix, " \t\r\n") {
		return fmt.Errorf("prefix %q: must not contain white space", c.Prefix)
	}
	switch {
	case c.LeaseTTL < 0:
		return fmt.Errorf("lease_ttl %s: must be positive, e.g. %s", c.LeaseTTL, DefaultLeaseTTL)
	case c.LeaseTTL > 0 && c.LeaseTTL < MinLeaseTTL:
		return fmt.Errorf("lease_ttl %s: must be at least %s (etcd grants no shorter lease)", c.LeaseTTL, MinLeaseTTL)
	case c.LeaseTTL%time.Second != 0:
		return fmt.Errorf("lease_ttl %s: must be a whole number of seconds (etcd leases count seconds), e.g. %s", c.LeaseTTL, c.LeaseTTL.Round(time.Second))
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("dial_timeout %s: must be positive, e.g. %s", c.DialTimeout, DefaultDialTimeout)
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if c.Password != "" && c.Username == "" {
		return errors.New("password is set but username is not: set both, or neither")
	}
	if strings.ContainsAny(c.ID, "\r\n") {
		return fmt.Errorf("id %q: must be one line", c.ID)
	}
	return nil
}

// checkEndpoint says what is wrong with one endpoint.
func checkEndpoint(ep string, tlsOn bool) error {
	if ep == "" {
		return errors.New("is empty")
	}
	if !strings.Contains(ep, "://") {
		if _, _, err := net.SplitHostPort(ep); err != nil {
			return errors.New("is not a member's client URL like http://127.0.0.1:2379 or host:port")
		}
		return nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return errors.New("is not a member's client URL like http://127.0.0.1:2379")
	}
	switch u.Scheme {
	case "http":
		if tlsOn {
			return errors.New("is plain http but tls is set: write https://")
		}
	case "https":
	case "unix", "unixs":
		return nil
	default:
		return fmt.Errorf("has scheme %q: use http, https, unix or unixs", u.Scheme)
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return errors.New("has no port: write e.g. http://127.0.0.1:2379")
	}
	return nil
}

// tlsConfig is the client TLS configuration of c: nil for plain text.
func (c *Config) tlsConfig() (*tls.Config, error) {
	if c.TLS.Set() {
		return c.TLS.Client("tls.", "")
	}
	for _, ep := range c.Endpoints {
		if strings.HasPrefix(ep, "https://") || strings.HasPrefix(ep, "unixs://") {
			// Verified against the system's roots.
			return &tls.Config{MinVersion: tls.VersionTLS12}, nil
		}
	}
	return nil, nil
}
